"""Stage 1, the clinician question from the patient's message: one module per `program/archehr/question` option."""
