"""Stage 3, the answer: every implementation.

- `lm.py`: `AnswerGenerator`, one LM call grounded in the selected evidence (`program/archehr/answer=lm`).
- `extractive.py`: `ExtractiveAnswer`, the note's evidence sentences quoted, no LM (`answer=extractive`).

This package is also the old module `programs.archehr.answer` (the LM stage, now `answer/lm.py`): its public names
are re-exported here so `_target_: programs.archehr.answer.AnswerGenerator` keeps resolving to the same object. The
old name collides with the package's, so it needs no entry in `common.aliases.MOVED_MODULES` (and gets no
deprecation line); the re-export goes with the other old names in the next release.
"""

from programs.archehr.answer.lm import AnswerGenerator

__all__ = ["AnswerGenerator"]
