"""Stage 3, the answer: one module per `program/archehr/answer` option."""
