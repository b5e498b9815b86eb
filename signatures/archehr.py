"""Signatures of the ArchEHR-QA 2026 cascade: interpret -> score evidence -> answer -> align. `with_limits` fills
`{max_words}` from the config value the stage's code enforces."""

from __future__ import annotations

from typing import Literal

import dspy


def with_limits(signature: type[dspy.Signature], **limits: int) -> type[dspy.Signature]:
    """`signature` with `{name}` placeholders in its instructions and field descriptions filled from `limits`."""

    def fill(text: str) -> str:
        for name, value in limits.items():
            text = text.replace("{" + name + "}", str(value))
        return text

    out = signature.with_instructions(fill(signature.instructions))
    for name, field in {**signature.input_fields, **signature.output_fields}.items():
        desc = (field.json_schema_extra or {}).get("desc")
        if desc and fill(desc) != desc:
            out = out.with_updated_fields(name, desc=fill(desc))
    return out


class InterpretQuestion(dspy.Signature):
    """You are a clinical administrative assistant. Read the patient's message and rewrite the question it
    asks as one professional question a clinician would ask of the patient's hospital record. Keep the
    clinical focus of the patient's question; do not diagnose, speculate or add facts. Output only the
    question, without preamble, in at most {max_words} words."""

    patient_narrative: str = dspy.InputField(desc="the patient's own message, in their words")
    patient_question: str = dspy.InputField(desc="the key question phrases the patient wrote, if marked")
    clinician_question: str = dspy.OutputField(desc="one clinician question, at most {max_words} words")


class ScoreEvidence(dspy.Signature):
    """You are a clinical evidence scorer. For the clinician's question, rate every numbered sentence of
    the clinical note on a 1-5 scale: 5 = directly answers the question; 4 = essential supporting detail;
    3 = related context that may help; 1-2 = irrelevant to the question. Return exactly one integer per
    sentence, in the order the sentences are listed."""

    clinician_question: str = dspy.InputField()
    note_sentences: str = dspy.InputField(desc="one sentence per line, formatted `[id] text`")
    scores: list[int] = dspy.OutputField(desc="one 1-5 score per listed sentence, in order")


class ScoreEvidenceById(dspy.Signature):
    """You are a clinical evidence scorer. For the clinician's question, rate every numbered sentence of
    the clinical note on a 1-5 scale: 5 = directly answers the question; 4 = essential supporting detail;
    3 = related context that may help; 1-2 = irrelevant to the question. Most sentences of a note are
    irrelevant to one question; only a few answer it. Give each sentence's id with its score."""

    clinician_question: str = dspy.InputField()
    note_sentences: str = dspy.InputField(desc="one sentence per line, formatted `[id] text`")
    scores: dict[str, int] = dspy.OutputField(desc="each listed sentence's id -> its 1-5 score")


class RateSentence(dspy.Signature):
    """You are a clinical evidence scorer. The clinical note is listed in full for context; rate only the one
    sentence given at the end: how much does it help answer the clinician's question? 5 = it directly answers the
    question; 4 = an essential supporting detail (a finding, treatment or reason the answer rests on); 3 = related
    context that may help; 2 = about the patient but not this question; 1 = unrelated. Most sentences of a note
    are 1 or 2 for any one question."""

    clinician_question: str = dspy.InputField()
    note_sentences: str = dspy.InputField(desc="the whole note, one sentence per line, formatted `[id] text`")
    sentence: str = dspy.InputField(desc="the one sentence to rate, formatted `[id] text`")
    score: int = dspy.OutputField(desc="this sentence's 1-5 score")


class GenerateAnswer(dspy.Signature):
    """You are a clinical documentation specialist. Answer the clinician's question using only the
    clinical note: the selected evidence sentences first, the full note only as a safety net. Do not use
    outside knowledge and do not speculate. Write plain sentences in a professional tone, at most {max_words} words."""

    clinician_question: str = dspy.InputField()
    evidence: str = dspy.InputField(desc="selected note sentences, one per line, formatted `[id] text`")
    note_excerpt: str = dspy.InputField(desc="the full note excerpt")
    answer: str = dspy.OutputField(desc="a grounded answer, at most {max_words} words")


class AlignAnswer(dspy.Signature):
    """You align an answer to the clinical note it is based on. For each numbered answer sentence, list the
    ids of the note sentences that directly support it. Be conservative: cite a note sentence only when it
    states what the answer sentence says; give an empty list when no note sentence supports it. Return one
    list per answer sentence, in the order the answer sentences are listed."""

    answer_sentences: str = dspy.InputField(desc="one answer sentence per line, formatted `[id] text`")
    note_sentences: str = dspy.InputField(desc="one note sentence per line, formatted `[id] text`")
    citations: list[list[str]] = dspy.OutputField(desc="for each answer sentence, the supporting note sentence ids")


class CiteSupport(dspy.Signature):
    """You link one sentence of a clinical answer to the clinical note it was written from. List the ids of the
    note sentences that state what the answer sentence says (an answer sentence usually restates one to three
    note sentences, often in other words). Give an empty list only when no note sentence states it."""

    note_sentences: str = dspy.InputField(desc="one note sentence per line, formatted `[id] text`")
    answer_sentence: str = dspy.InputField(desc="the one answer sentence to link")  # last: the note is the frame
    citations: list[str] = dspy.OutputField(desc="the ids of the note sentences that support the answer sentence")


class JudgeGrounding(dspy.Signature):
    """You check one sentence of a clinical answer against the note sentences it cites. Every fact in the sentence
    (finding, negation, direction of change, number or dose, side or site, reason, order of events) must be stated or
    directly implied by the note sentences; plain-language paraphrase is fine. Say `contradicted` when the note states
    otherwise, `not in the note` when the sentence adds a fact the note does not hold, else `supported`."""

    answer_sentence: str = dspy.InputField()
    note_sentences: str = dspy.InputField(desc="the cited note sentences, one per line, formatted `[id] text`")
    verdict: Literal["supported", "contradicted", "not in the note"] = dspy.OutputField()
    kind: Literal["none", "negation", "direction", "quantity", "side/site", "reason/attribution", "time/order",
                  "other"] = dspy.OutputField(desc="the kind of conflict; none when supported")
    conflicting_words: str = dspy.OutputField(desc="the words of the answer sentence the note does not support "
                                                   "(empty when supported)")
