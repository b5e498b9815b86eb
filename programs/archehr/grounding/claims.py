"""Grounding by what a sentence claims: paraphrases score low on similarity even when right, but a fabrication names
a drug, test or number the note lacks. Unsupported when a quantity, drug or lab test of the sentence is not in the
note, with `unknown_terms: tokenizer` a rare word the note lacks (lay words split too), with `check_negation` a negation
its best support lacks, or when its best support has cosine below `min_similarity`.
"""

from __future__ import annotations

from common.errors import ConfigError, number_in
from programs.archehr.grounding.similarity import NoteFacts, SimilarityGroundingCheck, content
from programs.archehr.grounding.verdicts import CONTRADICTED, NOT_IN_NOTE, SUPPORTED
from programs.archehr.shared.claims import contradictions, named_drugs, named_terms, quantities, unsupported_quantities
from programs.archehr.shared.clinical_lexicon import TESTS, words
from programs.archehr.shared.similarity import cosine_matrix
from retrieval.embed import Embedder
from tasks.archehr.data import NoteSentence

NEGATION_REASON = "negation differs from its support"
# lab tests whose mention is a claim (generic words such as "culture" or short ones such as "pt" are not)
_CLAIMED_TESTS = frozenset(t for t in TESTS if len(t) >= 3 and t not in {"culture", "cultures", "urinalysis"})


class ClaimsGroundingCheck(SimilarityGroundingCheck):
    def __init__(self, embedder: Embedder, min_similarity: float, number_tolerance: float, number_context: int,
                 check_negation: bool, unknown_terms: str, on_unsupported: str, max_words: int, soft_cut_ratio: float,
                 judge: str = "none", min_coverage: float = 0.0) -> None:
        super().__init__(embedder, min_similarity, min_coverage, on_unsupported, max_words, soft_cut_ratio, judge)
        if unknown_terms not in ("lexicon", "tokenizer"):
            raise ConfigError(f"program.grounding.unknown_terms must be lexicon or tokenizer, not {unknown_terms!r}")
        self.number_tolerance = number_in("program.grounding.number_tolerance", number_tolerance, 0, 1, high_open=True)
        self.number_context = number_in("program.grounding.number_context", number_context, 0, integer=True)
        self.check_negation, self.unknown_terms = check_negation, unknown_terms

    def verdict(self, text: str, cited: list[NoteSentence], note: list[NoteSentence],
                facts: NoteFacts | None = None) -> dict:
        facts = facts or self.note_facts(note)
        note_text = " ".join(s.text for s in note)
        candidates = facts.candidates
        note_sims = [float(x) for x in cosine_matrix(self.embedder, [text], [s.text for s in candidates])[0]] \
            if candidates else []
        nearest = [candidates[j] for j in sorted(range(len(candidates)), key=lambda j: -note_sims[j])]
        by_id = {s.id: x for s, x in zip(candidates, note_sims, strict=True)}
        pool = cited or candidates
        sims = [by_id[s.id] if s.id in by_id else float(cosine_matrix(self.embedder, [text], [s.text])[0][0])
                for s in pool]
        ranked = sorted(range(len(pool)), key=lambda j: -sims[j])
        best = pool[ranked[0]] if ranked else None
        support = [pool[j] for j in ranked if sims[j] >= self.min_similarity][:3]
        reasons = []
        if not support:
            reasons.append(f"no {'cited' if cited else 'note'} sentence with similarity >= {self.min_similarity}")
        # a number must be in what the sentence rests on: its citations and the note sentences closest to it
        near = " ".join(s.text for s in [*cited, *nearest[: self.number_context]])
        missing = unsupported_quantities(quantities(text), quantities(near), self.number_tolerance)
        if missing:
            reasons.append(f"numbers not in the note: {', '.join(dict.fromkeys(missing))}")
        terms = named_terms(note_text)
        drugs = sorted(d for d in named_drugs(text) if d not in terms and d[:6] not in terms)
        if drugs:
            reasons.append(f"drugs not in the note: {', '.join(drugs)}")
        tests = sorted({w for w in words(text) if w in _CLAIMED_TESTS} - terms)
        if tests:
            reasons.append(f"tests not in the note: {', '.join(tests)}")
        if self.unknown_terms == "tokenizer":
            novel = sorted(t for t in self.specific_terms(text) if t[:5] not in facts.stems and t not in drugs)
            if novel:
                reasons.append(f"terms not in the note: {', '.join(novel)}")
        if self.check_negation and best is not None:
            flipped = contradictions(text, [s.text for s in (cited or [best])])
            if flipped:
                reasons.append(f"{NEGATION_REASON} on: {', '.join(sorted(flipped))}")
        words_ = content(text)
        near = content(" ".join(s.text for s in (cited or support)))
        coverage = len(words_ & (near | facts.words)) / len(words_) if words_ else 1.0
        if coverage < self.min_coverage:
            reasons.append(f"{coverage:.0%} of its content words are in the note")
        negation = any(r.startswith(NEGATION_REASON) for r in reasons)
        verdict = CONTRADICTED if negation else NOT_IN_NOTE if reasons else SUPPORTED
        return {"verdict": verdict, "support_ids": [s.id for s in support],
                "similarity": round(sims[ranked[0]], 4) if sims else None, "coverage": round(coverage, 4),
                "reasons": reasons}
