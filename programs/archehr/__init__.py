"""The ArchEHR-QA 2026 cascade: one package per stage (question/, evidence/, answer/, alignment/, grounding/, each
with every implementation of its stage, LM and non-LLM, and its learned parts and their fit), shared/ for what
several stages read a note with, and the program-level files (pipeline, contract, record, report, ...) here."""

from programs.archehr.pipeline import ArchEHRCascade

__all__ = ["ArchEHRCascade"]
