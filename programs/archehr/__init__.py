"""The ArchEHR-QA 2026 cascade: a package per stage (its implementations and fits), shared/, and the program files."""

from programs.archehr.pipeline import ArchEHRCascade

__all__ = ["ArchEHRCascade"]
