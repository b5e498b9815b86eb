"""ArchEHR-QA 2025: the 2026 cascade's stages composed into one cited answer."""

from programs.archehr2025.pipeline import CitedAnswerCascade

__all__ = ["CitedAnswerCascade"]
