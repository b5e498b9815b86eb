"""`ReaderGroundingCheck`: the claims rules and a reader verifier (reader_verifier.py). A sentence is flagged when
either flags it (`rules: false`: the verifier alone). With `judge: lm` the verifier is the LM judge's first pass."""

from __future__ import annotations

from common.errors import ConfigError, number_in
from programs.archehr.grounding.claims import ClaimsGroundingCheck
from programs.archehr.grounding.reader_verifier import ReaderVerifier
from programs.archehr.grounding.similarity import NoteFacts
from programs.archehr.grounding.verdicts import SUPPORTED
from programs.archehr.shared.similarity import cosine_matrix
from retrieval.embed import Embedder
from tasks.archehr.data import NoteSentence

PREMISE_WITHOUT_CITATIONS = 3  # an uncited answer sentence is checked against the note's closest sentences


class ReaderGroundingCheck(ClaimsGroundingCheck):
    def __init__(self, embedder: Embedder, min_similarity: float, number_tolerance: float, number_context: int,
                 check_negation: bool, unknown_terms: str, on_unsupported: str, max_words: int, soft_cut_ratio: float,
                 judge: str = "none", min_coverage: float = 0.0, verifier: ReaderVerifier | None = None,
                 rules: bool = True, judge_from: float = 0.0) -> None:
        super().__init__(embedder, min_similarity, number_tolerance, number_context, check_negation, unknown_terms,
                         on_unsupported, max_words, soft_cut_ratio, judge, min_coverage)
        self.judge_from = number_in("program.grounding.judge_from", judge_from, 0, 1)
        if self.judge_from and judge != "lm":
            raise ConfigError("program.grounding.judge_from gates the LM judge: set program.grounding.judge=lm too")
        if not isinstance(rules, bool):
            raise ConfigError(f"program.grounding.rules must be true or false, not {rules!r}")
        if not isinstance(verifier, ReaderVerifier):
            raise ConfigError("program.grounding.verifier must name a verifier (_target_: "
                              "programs.archehr.grounding.reader_verifier.ReaderVerifier)")
        self.verifier = verifier
        self.rules = rules

    def wants_judge(self, out: dict) -> bool:
        """The LM is asked about a sentence the verifier gives at least `judge_from` probability of not being
        supported (0: every sentence), or one the rules flagged."""
        found = out.get("verifier")
        return found is None or found["probability"] >= self.judge_from or bool(out["reasons"])

    def verdict(self, text: str, cited: list[NoteSentence], note: list[NoteSentence],
                facts: NoteFacts | None = None) -> dict:
        facts = facts or self.note_facts(note)
        out = super().verdict(text, cited, note, facts)
        if not self.rules:
            out.update(verdict=SUPPORTED, reasons=[])
        premise = cited
        if not premise and facts.candidates:
            sims = cosine_matrix(self.embedder, [text], [s.text for s in facts.candidates])[0]
            premise = [facts.candidates[j] for j in sorted(range(len(sims)), key=lambda j: -sims[j])]
            premise = premise[:PREMISE_WITHOUT_CITATIONS]
        if not premise:
            out["verifier"] = None
            return out
        found = self.verifier(answer_sentence=text, note_sentences=premise)
        out["verifier"] = {"verdict": found.verdict, "probability": found.probability,
                           "threshold": round(self.verifier.threshold, 4)}
        if found.verdict != SUPPORTED:
            out["reasons"] = [*out["reasons"], f"verifier: {found.verdict} (p={found.probability:.2f})"]
            out["verdict"] = found.verdict
        return out
