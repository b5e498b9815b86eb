"""The ArchEHR-QA 2026 cascade: interpret -> score evidence -> answer -> align (4 LM calls per case)."""

from __future__ import annotations

from typing import Literal

import dspy

from programs.archehr.align import AnswerAligner
from programs.archehr.answer import AnswerGenerator
from programs.archehr.evidence import EvidenceScorer
from programs.archehr.interpret import QuestionInterpreter
from programs.archehr.text import split_sentences
from programs.archehr.usage import UsageLedger
from tasks.archehr.data import AnswerSentence, Case

ROLES = ("question", "evidence", "answer", "alignment")


class ArchEHRCascade(dspy.Module):
    def __init__(
        self,
        *,
        question_max_words: int = 15,
        strict_threshold: int = 4,
        lenient_threshold: int = 3,
        fallback_count: int = 3,
        answer_max_words: int = 75,
        soft_cut_ratio: float = 0.6,
        max_citations: int = 3,
        anchor: Literal["clinician_question", "patient_narrative"] = "clinician_question",
        question_demos: list[dspy.Example] | None = None,
        role_lms: dict[str, dspy.LM] | None = None,
    ) -> None:
        super().__init__()
        if anchor not in ("clinician_question", "patient_narrative"):
            raise ValueError(f"program.evidence.anchor must be clinician_question or patient_narrative, not {anchor!r}")
        self.anchor = anchor
        self.question = QuestionInterpreter(question_max_words, question_demos)
        self.evidence = EvidenceScorer(strict_threshold, lenient_threshold, fallback_count)
        self.answer = AnswerGenerator(answer_max_words, soft_cut_ratio)
        self.alignment = AnswerAligner(max_citations)
        # LMs are runtime resources, not program state: kept out of save()/load().
        self._role_lms = dict(role_lms or {})

    def _lm_context(self, role: str):
        lm = self._role_lms.get(role)
        return dspy.context(lm=lm) if lm is not None else dspy.context()

    def forward(self, case: Case) -> dspy.Prediction:
        ledger = UsageLedger()
        fallbacks: dict[str, str] = {}

        with ledger.stage("question"), self._lm_context("question"):
            q = self.question(case.patient_narrative, " ".join(case.patient_question_phrases))
        if q.fallback:
            fallbacks["question"] = q.fallback
        pred = {"case_id": case.case_id, "clinician_question": q.clinician_question}

        if not case.sentences:  # e.g. the 2026 Subtask-1 test release: narratives only
            return dspy.Prediction(**pred, evidence_ids=[], scores=None, selection="no_note", answer=None,
                                   alignment=[], alignment_source=None, dropped_ids=0, fallbacks=fallbacks,
                                   usage=ledger.as_dict())

        anchor = q.clinician_question if self.anchor == "clinician_question" else case.patient_narrative
        sentences = list(case.sentences)
        with ledger.stage("evidence"), self._lm_context("evidence"):
            ev = self.evidence(anchor, sentences)
        if ev.fallback:
            fallbacks["evidence"] = ev.fallback
        by_id = {s.id: s for s in sentences}
        evidence = [by_id[i] for i in ev.evidence_ids]

        with ledger.stage("answer"), self._lm_context("answer"):
            ans = self.answer(q.clinician_question, evidence, case.note_text)
        if ans.fallback:
            fallbacks["answer"] = ans.fallback

        # Subtask 4 aligns the reference answer sentences when the input provides them; else our own answer.
        if case.answer_sentences:
            answer_sentences, alignment_source = list(case.answer_sentences), "reference"
        else:
            alignment_source = "generated"
            answer_sentences = [AnswerSentence(str(i), t) for i, t in enumerate(split_sentences(ans.answer), 1)]
        with ledger.stage("alignment"), self._lm_context("alignment"):
            al = self.alignment(answer_sentences, sentences)
        if al.fallback:
            fallbacks["alignment"] = al.fallback

        return dspy.Prediction(
            **pred, evidence_ids=ev.evidence_ids, scores=ev.scores, selection=ev.selection, answer=ans.answer,
            alignment=al.alignment, alignment_source=alignment_source, dropped_ids=al.dropped_ids,
            fallbacks=fallbacks, usage=ledger.as_dict(),
        )
