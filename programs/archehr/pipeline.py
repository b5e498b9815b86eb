"""The ArchEHR-QA 2026 cascade: interpret -> score evidence -> answer -> align (4 LM calls per case)."""

from __future__ import annotations

import inspect

import dspy

from common.note_text import split_sentences
from common.usage import UsageLedger
from programs.archehr.grounding.verdicts import SUPPORTED
from programs.archehr.stages import AlignmentStage, AnswerStage, EvidenceStage, QuestionStage
from tasks.archehr.data import AnswerSentence, Case

ROLES = ("question", "evidence", "answer", "alignment")


class ArchEHRCascade(dspy.Module):
    """Four stages, each with the same inputs/outputs whether it calls an LM or not (stages.py). `no_lm_fallbacks`
    replace an LM stage whose output failed (program/archehr/fallback=no_lm); else its own fallback answers."""

    def __init__(
        self,
        *,
        question: QuestionStage,
        evidence: EvidenceStage,
        answer: AnswerStage,
        alignment: AlignmentStage,
        no_lm_fallbacks: dict[str, dspy.Module] | None = None,
        role_lms: dict[str, dspy.LM] | None = None,
        grounding: dspy.Module | None = None,
    ) -> None:
        super().__init__()
        self.question, self.evidence, self.answer, self.alignment = question, evidence, answer, alignment
        self._grounding = grounding  # None with program/archehr/grounding=none
        # Plain dicts: DSPy's named_parameters() skips the Modules in them, so save()/load() ignore these.
        self._no_lm = dict(no_lm_fallbacks or {})
        self._role_lms = dict(role_lms or {})

    def _stage(self, name: str, ledger: UsageLedger, fallbacks: dict[str, str], *args,
               **optional) -> dspy.Prediction:
        """Run one stage under its role's LM, timed; on a failure its no-LM module answers if configured. `optional`
        keyword inputs go only to implementations whose `forward` names them."""
        with ledger.stage(name, self._role_lms.get(name)):
            stage = getattr(self, name)
            out = stage(*args, **takes(stage, optional))
            ledger.repaired(name, out.get("repairs", 0))  # stages without string outputs report none
            # a reply that parsed but says nothing (every score equal, no citation): counted, and replaced like a failure
            empty = out.get("degenerate")
            if empty:
                ledger.degenerate(name, empty)
            if (out.fallback or empty) and name in self._no_lm:
                fallbacks[name] = (out.fallback or f"degenerate output: {empty}") + " -> no-LM stage"
                out = self._no_lm[name](*args, **takes(self._no_lm[name], optional))
        if out.fallback:
            fallbacks[name] = out.fallback
        return out

    def interpret(self, case: Case, ledger: UsageLedger, fallbacks: dict[str, str]) -> dspy.Prediction:
        """Stage 1 (ArchEHR-QA 2025, given the clinician question, overrides it)."""
        return self._stage("question", ledger, fallbacks, case.patient_narrative, " ".join(case.patient_question_phrases))

    def forward(self, case: Case) -> dspy.Prediction:
        ledger = UsageLedger()
        fallbacks: dict[str, str] = {}

        q = self.interpret(case, ledger, fallbacks)
        pred = {"case_id": case.case_id, "clinician_question": q.clinician_question,
                "question_candidates": q.get("candidates")}

        if not case.sentences:  # e.g. the 2026 Subtask-1 test release: narratives only
            return dspy.Prediction(**pred, evidence_ids=[], scores=None, selection="no_note", answer=None,
                                   alignment=[], alignment_source=None, dropped_ids=0, fallbacks=fallbacks,
                                   degenerate=ledger.degenerates(), repairs=ledger.repairs(), usage=ledger.as_dict())

        sentences = list(case.sentences)
        ev = self._stage("evidence", ledger, fallbacks, q.clinician_question, case.patient_narrative, sentences)
        by_id = {s.id: s for s in sentences}
        evidence = [by_id[i] for i in ev.evidence_ids]

        ans = self._stage("answer", ledger, fallbacks, q.clinician_question, evidence, case.note_text,
                          scores=ev.scores)

        # Subtask 4 aligns the reference answer sentences when the input provides them; else our own answer.
        if case.answer_sentences:
            answer_sentences, alignment_source = list(case.answer_sentences), "reference"
        else:
            alignment_source = "generated"
            answer_sentences = [AnswerSentence(str(i), t) for i, t in enumerate(split_sentences(ans.answer), 1)]
        al = self._stage("alignment", ledger, fallbacks, answer_sentences, sentences)
        answer, alignment = ans.answer, al.alignment
        answer_items = [{"id": a.id, "text": a.text} for a in answer_sentences]

        grounding = None
        if self._grounding is not None:
            # the program's own answer, with the alignment's citations when it was the answer aligned
            own = answer_items if alignment_source == "generated" else [
                {"id": str(i), "text": t} for i, t in enumerate(split_sentences(answer), 1)]
            with ledger.stage("grounding", self._role_lms.get("grounding")):
                check = self._grounding(own, alignment if alignment_source == "generated" else [], sentences, answer,
                                        **takes(self._grounding, {"evidence": evidence}))
            grounding = check.verdicts
            if check.dropped:
                answer = check.answer
                if alignment_source == "generated":  # the kept sentences keep their ids and links
                    alignment = [a for a in alignment if a["answer_id"] not in check.dropped]
                    answer_items = [a for a in answer_items if a["id"] not in check.dropped]
                # refilled quotes of the note: new sentences after the kept ones, each citing its note sentence
                next_id = max((int(a["id"]) for a in own if str(a["id"]).isdigit()), default=0) + 1
                for n, quote in enumerate(check.get("refilled") or [], next_id):
                    grounding.append({"answer_id": str(n), "text": quote["text"], "verdict": SUPPORTED,
                                      "support_ids": quote["evidence_id"], "reasons": [],
                                      "refill": "quoted from the note after a flagged sentence was dropped"})
                    if alignment_source == "generated":
                        answer_items.append({"id": str(n), "text": quote["text"]})
                        alignment.append({"answer_id": str(n), "evidence_id": quote["evidence_id"]})

        return dspy.Prediction(
            **pred, evidence_ids=ev.evidence_ids, scores=ev.scores, selection=ev.selection, answer=answer,
            alignment=alignment, alignment_source=alignment_source, dropped_ids=al.dropped_ids,
            answer_sentences=answer_items, grounding=grounding,
            fallbacks=fallbacks, degenerate=ledger.degenerates(), repairs=ledger.repairs(), usage=ledger.as_dict(),
        )


def takes(stage: object, optional: dict[str, object]) -> dict[str, object]:
    """The entries of `optional` that `stage.forward` has a parameter for."""
    try:
        params = inspect.signature(type(stage).forward).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in optional.items() if k in params}
