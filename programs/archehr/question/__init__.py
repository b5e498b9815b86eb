"""Stage 1, the clinician question from the patient's message: every implementation and its learned parts.

- `lm.py`: `LMQuestion`, one LM call (`program/archehr/question=lm`); `demos.py`: its few-shot demos.
- `finetuned.py`: `FinetunedQuestion`, a small GGUF model with a LoRA adapter, no API LM
  (`question=finetuned`); `chat_prompt.py`: its prompt; `rerank.py`: what its candidates are reranked by;
  `finetune.py`: how `optimizer=finetune` trains it.
- `baseline.py`: `BaselineQuestion`, a sentence of the message (`question=baseline`), the bar the learned stage must
  clear and the LM stage's no-LM fallback.
- `text.py`: the question text rules they share (normalising a message, openings, fitting a budget).
"""
