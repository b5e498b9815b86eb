"""Stage 4, which note sentences each answer sentence cites: one module per `program/archehr/alignment` option."""
