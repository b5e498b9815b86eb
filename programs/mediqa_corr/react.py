"""MedReAct: observation -> thought -> action (search | final_mistake | no_error), at most N steps per episode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import dspy

from common.failures import RECOVERABLE, describe
from signatures.constrained import with_output_schema
from signatures.mediqa_corr import MedReActStep
from tasks.mediqa_corr.data import Note


@dataclass
class Episode:
    steps: list[str] = field(default_factory=list)
    searches: int = 0
    proposal: tuple[int, str] | None = None   # (sentence id, corrected sentence)
    no_error: bool = False
    parse_failures: int = 0

    def history(self) -> str:
        return "\n\n".join(self.steps) if self.steps else "(none yet)"


class MedReAct(dspy.Module):
    def __init__(self, max_steps: int, search: Callable[..., str] | None = None) -> None:
        super().__init__()
        self.max_steps = max_steps
        self.search = search
        self.step = dspy.Predict(MedReActStep)

    def forward(self, note: Note, reflections: list[str]) -> dspy.Prediction:
        ids = [int(s) for s in note.sentence_ids]
        signature = with_output_schema(self.step.signature, "sentence_id", {"type": "integer", "enum": [-1, *ids]})
        # Length bounds keep a small model's JSON short enough to finish within max_tokens.
        for name, limit in (("observation", 400), ("thought", 400), ("search_query", 160), ("corrected_sentence", 400)):
            signature = with_output_schema(signature, name, {"type": "string", "maxLength": limit})
        episode = Episode()
        memory = "\n".join(f"- {r}" for r in reflections) or "(none)"
        for n in range(1, self.max_steps + 1):
            try:
                out = self.step(clinical_text=note.numbered(), reflections=memory, history=episode.history(),
                                signature=signature)
            except RECOVERABLE as exc:
                episode.parse_failures += 1
                episode.steps.append(f"Step {n}: (the model's output could not be parsed: {describe(exc)})")
                continue
            record = f"Step {n}:\nObservation: {out.observation}\nThought: {out.thought}\nAction: {out.action}"
            if out.action == "search":
                query = (out.search_query or "").strip() or out.thought[:200]
                episode.searches += 1
                if self.search is None:
                    result = "search is not available in this run"
                else:
                    try:
                        result = self.search(query=query)
                    except Exception as exc:  # a failing tool is an observation for the agent, not a crash
                        result = f"search failed: {type(exc).__name__}: {exc}"
                episode.steps.append(f"{record}({query})\nSearch results:\n{result}")
            elif out.action == "final_mistake":
                sid = int(out.sentence_id)
                corrected = (out.corrected_sentence or "").strip()
                if str(sid) not in note.sentence_ids or not corrected:
                    episode.steps.append(f"{record}\nInvalid answer: sentence {sid} does not exist or the correction "
                                         "is empty.")
                    continue
                episode.steps.append(f"{record}(sentence {sid}: {corrected})")
                episode.proposal = (sid, corrected)
                break
            else:
                episode.steps.append(record)
                episode.no_error = True
                break
        return dspy.Prediction(episode=episode, steps=len(episode.steps))
