"""Grounding check without an LLM: is each answer sentence supported by the note sentences it cites?

Supported when (1) its best support (its citations, else the whole note) has cosine >= `min_similarity`, (2) at least
`min_coverage` of its content words are in the note, (3) every number in it is, and (4) it names no specific term the
note lacks: a word the embedder's WordPiece splits ("warfarin" -> war ##far ##in; "heart" is one piece) sharing no
5-letter stem with a note word. `on_unsupported`: `flag` marks a flagged sentence, `drop` removes it and re-applies the
soft cut, `refill` also fills its room with whole evidence sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import dspy

from common.errors import ConfigError
from common.failures import RECOVERABLE, failure_reason
from programs.archehr.grounding.judge import GroundingJudge
from programs.archehr.grounding.verdicts import NOT_IN_NOTE, SUPPORTED, flagged
from programs.archehr.shared.lexical import tokens
from programs.archehr.shared.note_layout import is_header
from programs.archehr.shared.similarity import cosine_matrix
from programs.archehr.text import soft_cut
from retrieval.embed import Embedder
from tasks.archehr.data import NoteSentence

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# words the tokenizer may split that are not facts of the note
_STOPWORDS = frozenset({"because", "therefore", "however", "although", "discharge", "hospital", "admission",
                        "patient", "during", "before", "after"})


def _stem(token: str) -> str:
    """A crude suffix strip so 'elevated'/'elevation', 'stents'/'stent' meet."""
    for suffix in ("ation", "ing", "ed", "es", "s"):
        if len(token) > len(suffix) + 3 and token.endswith(suffix):
            return token[: -len(suffix)]
    return token


@dataclass(frozen=True)
class NoteFacts:
    candidates: list[NoteSentence]   # the non-header sentences (all when every one is a header)
    words: set[str]                  # content words (stemmed)
    numbers: set[str]
    stems: set[str]                  # 5-letter prefixes of the note's words
    by_id: dict[str, NoteSentence]   # every sentence by its id (citations, the judge's support)


def content(text: str) -> set[str]:
    return {_stem(t) for t in tokens(text) if len(t) > 2 or t.isdigit()}


class SimilarityGroundingCheck(dspy.Module):
    def __init__(self, embedder: Embedder, min_similarity: float, min_coverage: float, on_unsupported: str,
                 max_words: int, soft_cut_ratio: float, judge: str = "none") -> None:
        super().__init__()
        if on_unsupported not in ("flag", "drop", "refill"):
            raise ConfigError(f"program.grounding.on_unsupported must be flag, drop or refill, not {on_unsupported!r}")
        if judge not in ("none", "lm"):
            raise ConfigError(f"program.grounding.judge must be none or lm, not {judge!r}")
        # created only when configured, so the saved state of a program without it has no extra predictor
        self.judge = GroundingJudge() if judge == "lm" else None
        self.embedder = embedder
        self.min_similarity, self.min_coverage, self.on_unsupported = min_similarity, min_coverage, on_unsupported
        self.max_words, self.soft_cut_ratio = max_words, soft_cut_ratio

    def specific_terms(self, text: str) -> set[str]:
        """Words the tokenizer splits (rare, domain-specific), lower-cased."""
        tokenizer = self.embedder.tokenizer
        if tokenizer is None:
            return set()
        words = set(re.findall(r"[a-z][a-z-]{4,}", text.lower()))
        return {w for w in words if len(tokenizer.tokenize(w)) >= 2 and w not in _STOPWORDS}

    @staticmethod
    def note_facts(note: list[NoteSentence]) -> NoteFacts:
        """What every answer sentence of a case is checked against, computed once per case."""
        text = " ".join(s.text for s in note)
        return NoteFacts(candidates=[s for s in note if not is_header(s.text)] or note, words=content(text),
                         numbers=set(_NUMBER.findall(text)),
                         stems={w[:5] for w in re.findall(r"[a-z][a-z-]+", text.lower())},
                         by_id={s.id: s for s in note})

    def verdict(self, text: str, cited: list[NoteSentence], note: list[NoteSentence],
                facts: NoteFacts | None = None) -> dict:
        facts = facts or self.note_facts(note)
        pool = cited or facts.candidates
        sims = [float(x) for x in cosine_matrix(self.embedder, [text], [s.text for s in pool])[0]] if pool else []
        ranked = sorted(range(len(pool)), key=lambda j: -sims[j])
        support = [pool[j] for j in ranked if sims[j] >= self.min_similarity][:3]
        words = content(text)
        near = content(" ".join(s.text for s in (cited or support)))
        coverage = len(words & (near | facts.words)) / len(words) if words else 1.0
        novel_numbers = sorted(set(_NUMBER.findall(text)) - facts.numbers)
        novel_terms = sorted(t for t in self.specific_terms(text) if t[:5] not in facts.stems)
        reasons = []
        if not support:
            reasons.append(f"no {'cited' if cited else 'note'} sentence with similarity >= {self.min_similarity}")
        if coverage < self.min_coverage:
            reasons.append(f"{coverage:.0%} of its content words are in the note")
        if novel_numbers:
            reasons.append(f"numbers not in the note: {', '.join(novel_numbers)}")
        if novel_terms:
            reasons.append(f"terms not in the note: {', '.join(novel_terms)}")
        return {"verdict": NOT_IN_NOTE if reasons else SUPPORTED, "support_ids": [s.id for s in support],
                "similarity": round(sims[ranked[0]], 4) if sims else None, "coverage": round(coverage, 4),
                "reasons": reasons}

    def checked(self, text: str, cited: list[NoteSentence], note: list[NoteSentence], facts: NoteFacts) -> dict:
        """The checks' verdict on one answer sentence, then the LM judge's when configured and `wants_judge`: its flag
        adds a reason and is the verdict when the checks found none; an unparsable reply is no evidence either way."""
        out = self.verdict(text, cited, note, facts)
        if self.judge is None or not self.wants_judge(out):
            return out
        support = cited or [facts.by_id[i] for i in out.get("support_ids") or [] if i in facts.by_id]
        if not support:
            out["judge"] = {"unavailable": "no note sentence to judge against"}
            return out
        try:
            found = self.judge(answer_sentence=text, note_sentences=support)
        except RECOVERABLE as exc:
            out["judge"] = {"unavailable": f"LM judge unavailable ({failure_reason(exc)})"}
            return out
        out["judge"] = {"verdict": found.verdict, "kind": found.kind, "conflicting_words": found.conflicting_words}
        if found.verdict != SUPPORTED:
            words = f": '{found.conflicting_words}'" if found.conflicting_words else ""
            out["reasons"] = [*out["reasons"], f"LM judge: {found.verdict} ({found.kind}){words}"]
            if out["verdict"] == SUPPORTED:
                out["verdict"] = found.verdict
        return out

    def wants_judge(self, out: dict) -> bool:
        """Whether the LM judge is asked about a sentence the checks gave `out` (here: every one)."""
        return True

    def forward(self, answer_sentences: list[dict], alignment: list[dict], sentences: list[NoteSentence],
                answer: str | None = None, evidence: list[NoteSentence] | None = None) -> dspy.Prediction:
        """`evidence`: the note sentences the evidence stage selected, in note order (what `refill` quotes)."""
        facts = self.note_facts(sentences)
        cited = {a["answer_id"]: [facts.by_id[i] for i in a["evidence_id"] if i in facts.by_id] for a in alignment}
        verdicts = [{"answer_id": a["id"], "text": a["text"],
                     **self.checked(a["text"], cited.get(a["id"], []), sentences, facts)}
                    for a in answer_sentences]
        kept_answer, refilled = answer, []
        dropped = [v["answer_id"] for v in verdicts if flagged(v)]
        if self.on_unsupported != "flag" and answer is not None and dropped:
            kept = [v["text"] for v in verdicts if not flagged(v)]
            if self.on_unsupported == "refill":
                still_cited = {i for a in alignment if a["answer_id"] not in dropped for i in a["evidence_id"]}
                refilled = self.refill(kept, [s for s in evidence or [] if s.id not in still_cited])
            text = " ".join([*kept, *(s.text for s in refilled)])
            kept_answer = soft_cut(text, self.max_words, self.soft_cut_ratio) if text else ""
        return dspy.Prediction(verdicts=verdicts, answer=kept_answer,
                               dropped=dropped if self.on_unsupported != "flag" else [],
                               refilled=[{"text": s.text, "evidence_id": [s.id]} for s in refilled])

    def refill(self, kept: list[str], evidence: list[NoteSentence]) -> list[NoteSentence]:
        """The selected evidence sentences (note order, no headers) that fit whole in the word limit after the kept
        answer sentences: grounded by construction."""
        words, out = sum(len(t.split()) for t in kept), []
        for s in evidence:
            n = len(s.text.split())
            if not is_header(s.text) and words + n <= self.max_words:
                out.append(s)
                words += n
        return out
