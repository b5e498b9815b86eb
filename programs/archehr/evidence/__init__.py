"""Stage 2, which note sentences are evidence: one module per `program/archehr/evidence` option."""
