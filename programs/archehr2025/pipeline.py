"""ArchEHR-QA 2025: the 2026 stages, composed into one answer, a sentence a line, each ending with the note sentence
ids that support it (`|4,5|`). The 2025 cases give the clinician question: stage 1 runs only for a case without one."""

from __future__ import annotations

from dataclasses import replace

import dspy

from common.errors import ConfigError
from common.usage import UsageLedger
from programs.archehr.pipeline import ArchEHRCascade
from programs.archehr.stages import AlignmentStage, AnswerStage, EvidenceStage, QuestionStage
from tasks.archehr.data import Case
from tasks.archehr2025.submission import cited_answer


class CitedAnswerCascade(ArchEHRCascade):
    def __init__(self, *, use_given_question: bool, when_uncited: str, question: QuestionStage,
                 evidence: EvidenceStage, answer: AnswerStage, alignment: AlignmentStage,
                 no_lm_fallbacks: dict[str, dspy.Module] | None = None, role_lms: dict[str, dspy.LM] | None = None,
                 grounding: dspy.Module | None = None) -> None:
        super().__init__(question=question, evidence=evidence, answer=answer, alignment=alignment,
                         no_lm_fallbacks=no_lm_fallbacks, role_lms=role_lms, grounding=grounding)
        if when_uncited not in ("cite_evidence", "keep"):
            raise ConfigError(f"program.module.when_uncited must be cite_evidence or keep, not {when_uncited!r}")
        self.use_given_question = use_given_question
        self.when_uncited = when_uncited

    def interpret(self, case: Case, ledger: UsageLedger, fallbacks: dict[str, str]) -> dspy.Prediction:
        if self.use_given_question and case.clinician_question:
            return dspy.Prediction(clinician_question=case.clinician_question, fallback=None)
        return super().interpret(case, ledger, fallbacks)

    def forward(self, case: Case) -> dspy.Prediction:
        # Align the program's own answer sentences (never reference answer sentences a 2026-style file may hold).
        pred = super().forward(replace(case, answer_sentences=()))
        if pred.answer is None:
            return pred
        texts = {a["id"]: a["text"] for a in pred.answer_sentences}
        links = {a["answer_id"]: list(a["evidence_id"]) for a in pred.alignment}
        fallbacks = dict(pred.fallbacks)
        if not any(links.values()) and self.when_uncited == "cite_evidence":
            # the official scorer rejects an answer without a citation: the first sentence cites the evidence
            first = next(iter(texts), None)
            if first is not None:
                links[first] = list(pred.evidence_ids)[:3]
                fallbacks["citations"] = "alignment found no support: the first sentence cites the selected evidence"
        answer = cited_answer([(text, links.get(aid, [])) for aid, text in texts.items()])
        return dspy.Prediction(**{**{k: pred.get(k) for k in pred.keys()}, "answer": answer,
                                  "answer_text": pred.answer, "fallbacks": fallbacks})

