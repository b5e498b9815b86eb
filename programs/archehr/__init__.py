"""The ArchEHR-QA 2026 cascade, one file per stage."""

from programs.archehr.pipeline import ArchEHRCascade

__all__ = ["ArchEHRCascade"]
