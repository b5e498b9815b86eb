"""Stage 3, the answer: every implementation.

- `lm.py`: `LMAnswer`, one LM call grounded in the selected evidence (`program/archehr/answer=lm`).
- `extractive.py`: `ExtractiveAnswer`, the note's evidence sentences quoted, no LM (`answer=extractive`).
"""
