"""What several ArchEHR stages share to read a note and an answer without an LM; no stage of its own.

- `lexical.py`: tokens and BM25; `similarity.py`: cosine similarities with the program's one embedder.
- `clinical_lexicon.py`: drugs, tests, lay <-> clinical concepts; `claims.py`: what a sentence claims (quantities
  with units, drugs, negations).
- `note_layout.py`: a note's sections, each line's kind, `is_header`.
- `features.py`: feature helpers both learned heads use; `heads.py`: what the learned heads and their fits share
  (overrides of the fitted selection rule, the training cases); `selection.py`: their selection rules.

Used by evidence/, answer/, alignment/ and grounding/; it imports none of them.
"""
