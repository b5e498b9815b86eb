"""Stage 1 without an LM: the main clinical question of a patient message, as a clinician would put it.

The message is split into sentences; thanks, greetings and sign-offs are set aside; the question naming the most
clinical things is taken (the one the writer marks with "My question is" first), stripped of the request around
it and of fillers, its vague "this" filled from the sentences before it, turned to the third person with the
patient (often a relative of the writer) as subject, and shortened by dropping side clauses. A message that asks
nothing clinical ("What do you think?", or no question at all) gets a question built from its clinical focus:
"What is causing his cough and shortness of breath?". Word lists and rules only: no LM, well under 5 ms a message.
"""

from __future__ import annotations

import dspy

from programs.archehr.offline.question_build import Style, interpret
from programs.archehr.offline.question_person import find_patient, to_third_person
from programs.archehr.offline.question_text import capitalize


def third_person(text: str) -> str:
    """`text` with its patient as the grammatical person: a relative the writer names ('my mother') becomes
    he/she and the writer 'the family'; a writer speaking of themself becomes 'the patient'."""
    return capitalize(to_third_person(text, find_patient(text)))


class RuleQuestionInterpreter(dspy.Module):
    """Stage 1 by rules. Switches (all on by default, see question_build.Style): `third_person` (the patient as
    subject), `fill_vague` ('this' -> what the message named), `passive` ('Why did they stop it?' -> 'Why was it
    stopped?'), `add_focus` (a question naming no complaint gets the message's main one)."""

    def __init__(self, max_words: int, third_person: bool = True, fill_vague: bool = True, passive: bool = True,
                 add_focus: bool = True) -> None:
        super().__init__()
        self.max_words = max_words
        self.third_person = third_person
        self.style = Style(third_person=third_person, fill_vague=fill_vague, passive=passive, add_focus=add_focus)

    def forward(self, patient_narrative: str, patient_question: str = "") -> dspy.Prediction:
        # The marked question phrases when the XML gives them ("(none)" or empty when it does not), else the
        # narrative alone, as the 2026 test cases are released.
        marked = patient_question.strip()
        if marked.lower() in ("(none)", "none"):
            marked = ""
        question = interpret(patient_narrative or "", marked, self.max_words, self.style)
        return dspy.Prediction(clinician_question=question, fallback=None)
