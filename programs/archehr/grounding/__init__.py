"""The grounding check after stage 4: is each answer sentence supported by the note? One module per
`program/archehr/grounding` option (similarity.py, claims.py, reader.py with reader_verifier.py), the optional LM judge
(judge.py) and the verdict names (verdicts.py)."""
