"""Stage 1 without an LM: the patient's own question sentence, in the third person where that is simple."""

from __future__ import annotations

import re

import dspy

from programs.archehr.text import last_question_sentence, split_sentences, truncate_words

# Relatives the patient writes about become "the patient" (the note is theirs), then first-person forms.
_RELATIVE = (r"(?:mother|mom|mum|father|dad|husband|wife|son|daughter|brother|sister|grandmother|grandfather|aunt|uncle"
             r"|friend|partner)")
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\bmy {_RELATIVE}'s\b", re.I), "the patient's"),
    (re.compile(rf"\bmy {_RELATIVE}\b", re.I), "the patient"),
    (re.compile(r"\bI am\b|\bI'm\b", re.I), "the patient is"),
    (re.compile(r"\bI was\b", re.I), "the patient was"),
    (re.compile(r"\bI have\b|\bI've\b", re.I), "the patient has"),
    (re.compile(r"\bI\b"), "the patient"),
    (re.compile(r"\bme\b", re.I), "the patient"),
    (re.compile(r"\bmy\b", re.I), "the patient's"),
]


def third_person(text: str) -> str:
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return text[:1].upper() + text[1:] if text else text


class RuleQuestionInterpreter(dspy.Module):
    def __init__(self, max_words: int, third_person: bool = True) -> None:
        super().__init__()
        self.max_words = max_words
        self.third_person = third_person

    def forward(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction:
        # The marked question phrases when the XML gives them, else the narrative; in both, the last '?' sentence.
        source = patient_question.strip() or patient_narrative
        question = last_question_sentence(source) if split_sentences(source) else source
        if self.third_person:
            question = third_person(question)
        return dspy.Prediction(clinician_question=truncate_words(question, self.max_words), fallback=None)
