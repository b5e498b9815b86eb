"""The ArchEHR-QA 2026 cascade: one package per stage with every implementation and its fit, shared/, and the
program-level files (pipeline, contract, record, report) here."""

from programs.archehr.pipeline import ArchEHRCascade

__all__ = ["ArchEHRCascade"]
