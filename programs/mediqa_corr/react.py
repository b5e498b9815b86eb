"""MedReAct: observation -> thought -> action (search | final_mistake | no_error), at most N steps per episode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dspy

from common.errors import number_in
from common.failures import RECOVERABLE, failure_reason
from common.markup import without_markup
from signatures.constrained import with_output_schema, with_output_variants
from signatures.mediqa_corr import MedReActStep
from tasks.mediqa_corr.data import Note

ACTING = ("final_mistake", "no_error")  # the actions that end an episode (the third, search, reads on)


def cap(text: str, limit: int) -> str:
    """A long text for predictions.jsonl, cut at `limit` characters; " [...]" marks the cut."""
    return text if len(text) <= limit else text[:limit] + " [...]"


@dataclass
class Step:
    """One ReAct step: what the agent wrote, searched and got back, and why a step failed. `text()` is what the agent
    reads back in its history: prompts, DSPy cache hits and compiled programs depend on it staying the same."""

    n: int
    parsed: bool = True          # False: the model's output could not be parsed (`note` says why)
    observation: str = ""
    thought: str = ""
    action: str = ""             # search | final_mistake | no_error
    query: str = ""
    results: str = ""            # the search results text the agent read (or why search failed)
    passages: list[dict[str, str]] = field(default_factory=list)  # id, title, source of each passage returned
    sentence_id: int | None = None
    corrected: str = ""
    note: str = ""               # a parse failure or an invalid answer

    def text(self) -> str:
        if not self.parsed:
            return f"Step {self.n}: ({self.note})"
        head = f"Step {self.n}:\nObservation: {self.observation}\nThought: {self.thought}\nAction: {self.action}"
        if self.action == "search":
            return f"{head}({self.query})\nSearch results:\n{self.results}"
        if self.action == "final_mistake":
            return f"{head}\n{self.note}" if self.note else f"{head}(sentence {self.sentence_id}: {self.corrected})"
        return head

    def without_results(self) -> str:
        """The step with its search results left out (the history budget's first cut)."""
        if self.action != "search" or not self.parsed:
            return self.text()
        head = f"Step {self.n}:\nObservation: {self.observation}\nThought: {self.thought}\nAction: {self.action}"
        return f"{head}({self.query})\nSearch results: (left out: history budget)"

    def action_only(self) -> str:
        """The step as its action alone (the history budget's second cut)."""
        if not self.parsed:
            return self.text()
        what = f"search({self.query})" if self.action == "search" else self.action
        return f"Step {self.n}: {what} (observation and thought left out: history budget)"

    def as_record(self, limit: int) -> dict[str, Any]:
        """The step for predictions.jsonl; free texts capped at `limit` characters (passage ids/titles are not)."""
        texts = ("observation", "thought", "query", "results", "corrected", "note")
        return {"n": self.n, "parsed": self.parsed, "action": self.action,
                **{k: cap(getattr(self, k), limit) for k in texts},
                "sentence_id": self.sentence_id, "passages": [dict(p) for p in self.passages]}


@dataclass
class Episode:
    steps: list[Step] = field(default_factory=list)
    searches: int = 0
    proposal: tuple[int, str] | None = None   # (sentence id, corrected sentence)
    no_error: bool = False
    parse_failures: int = 0
    repairs: int = 0                          # output fields whose leaked markup was stripped

    def history(self, budget_tokens: int | None = None) -> str:
        """The steps as the agent reads them back. With `budget_tokens`, a history over the budget (counted as
        characters / 4, a tokenizer-free estimate) drops the oldest steps' search results first, then shortens the
        oldest steps to their action; the newest step is always whole. Each cut says what was left out."""
        if not self.steps:
            return "(none yet)"
        texts = [s.text() for s in self.steps]
        if budget_tokens is None:
            return "\n\n".join(texts)
        limit = 4 * budget_tokens
        for shorten in (Step.without_results, Step.action_only):
            for i in range(len(texts) - 1):
                if sum(map(len, texts)) <= limit:
                    return "\n\n".join(texts)
                texts[i] = shorten(self.steps[i])
        return "\n\n".join(texts)

    def clean(self, text: str | None) -> str:
        """An output field without leaked markup (unchanged, whitespace included, when it had none); counted."""
        value, repaired = without_markup(text)
        self.repairs += repaired
        return value


def passage_refs(result: Any) -> list[dict[str, str]]:
    """id, title and source of the passages a search returned (`retrieval.retriever.SearchResult`); plain strings
    from other search callables carry none."""
    return [{"id": str(p.id), "title": p.title, "source": p.source} for p in getattr(result, "passages", None) or []]


class MedReAct(dspy.Module):
    def __init__(self, max_steps: int, search: Callable[..., str] | None = None,
                 history_tokens: int | None = None) -> None:
        super().__init__()
        self.max_steps = number_in("program.react.max_steps", max_steps, 1, integer=True)
        # the budget of the earlier steps in each prompt (null: no bound)
        self.history_tokens = number_in("program.react.history_tokens", history_tokens, 1, integer=True, null=True)
        self.search = search
        self.step = dspy.Predict(MedReActStep)

    def _search(self, step: Step) -> None:
        if self.search is None:
            step.results = "search is not available in this run"
            return
        try:
            result = self.search(query=step.query)
        except Exception as exc:  # a failing tool is an observation for the agent, not a crash
            step.results = f"search failed: {type(exc).__name__}: {exc}"
            return
        step.results, step.passages = str(result), passage_refs(result)

    def forward(self, note: Note, reflections: list[str]) -> dspy.Prediction:
        ids = [int(s) for s in note.sentence_ids]
        signature = with_output_schema(self.step.signature, "sentence_id", {"type": "integer", "enum": [-1, *ids]})
        # length bounds keep a small model's JSON short enough to finish within max_tokens
        for name, limit in (("observation", 400), ("thought", 400), ("search_query", 160), ("corrected_sentence", 400)):
            signature = with_output_schema(signature, name, {"type": "string", "maxLength": limit})
        # Where the backend decodes a grammar, the fields after the action follow from it: a mistake names a sentence
        # of this note and a correction, the other actions -1 (a 1.5B model otherwise answered `final_mistake` with
        # sentence -1 on every step of 2 of 3 validation notes). A step whose search results nobody would read (the
        # last, or any without a search tool) must act: the 1.5B model otherwise searched until the fallback line.
        variants = {"search": {"search_query": {"minLength": 1}, "sentence_id": {"const": -1},
                               "corrected_sentence": {"maxLength": 0}},
                    "final_mistake": {"search_query": {"maxLength": 0}, "sentence_id": {"enum": ids},
                                      "corrected_sentence": {"minLength": 1}},
                    "no_error": {"search_query": {"maxLength": 0}, "sentence_id": {"const": -1},
                                 "corrected_sentence": {"maxLength": 0}}}
        signature = with_output_variants(signature, "action", variants)
        acting = with_output_schema(signature, "action", {"type": "string", "enum": list(ACTING)})  # keeps the variants
        episode = Episode()
        memory = "\n".join(f"- {r}" for r in reflections) or "(none)"
        for n in range(1, self.max_steps + 1):
            must_act = n == self.max_steps or self.search is None
            try:
                out = self.step(clinical_text=note.numbered(), reflections=memory, history=episode.history(self.history_tokens),
                                signature=acting if must_act else signature)
            except RECOVERABLE as exc:
                episode.parse_failures += 1
                episode.steps.append(Step(n, parsed=False,
                                          note=f"the model's output could not be parsed: {failure_reason(exc)}"))
                continue
            step = Step(n, observation=episode.clean(out.observation), thought=episode.clean(out.thought),
                        action=out.action)
            episode.steps.append(step)
            if out.action == "search":
                step.query = episode.clean(out.search_query).strip() or step.thought[:200]
                episode.searches += 1
                self._search(step)
            elif out.action == "final_mistake":
                step.sentence_id = int(out.sentence_id)
                step.corrected = episode.clean(out.corrected_sentence).strip()
                if str(step.sentence_id) not in note.sentence_ids or not step.corrected:
                    step.note = (f"Invalid answer: sentence {step.sentence_id} does not exist or the correction "
                                 "is empty.")
                    continue
                episode.proposal = (step.sentence_id, step.corrected)
                break
            else:
                episode.no_error = True
                break
        return dspy.Prediction(episode=episode, steps=len(episode.steps))
