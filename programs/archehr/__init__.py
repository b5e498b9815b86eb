"""The ArchEHR-QA 2026 cascade: one package per stage (question/, evidence/, answer/, alignment/, grounding/, each
with every implementation of its stage, LM and non-LLM, and its learned parts and their fit), shared/ for what
several stages read a note with, and the program-level files (pipeline, contract, record, report, ...) here.

The modules' old paths (`programs.archehr.question_model`, `programs.archehr.no_lm.SimilarityAligner`, ...) keep
working for one release: common/aliases.py's MOVED_MODULES, installed here before anything else is imported.
"""

from common.aliases import install_moved_modules

install_moved_modules()

from programs.archehr.pipeline import ArchEHRCascade  # noqa: E402

__all__ = ["ArchEHRCascade"]
