"""Who a patient message is about, and its question rewritten with that patient as the subject.

The writer is often a relative ("my 82 year old mother", "my friend's wife"): then the relative becomes he/she
and the writer drops out; when the writer is the patient, "I" becomes "the patient" (he/she when the message says
which), with the verb agreeing ("I am" -> "the patient is", "do I need" -> "does the patient need").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from programs.archehr.offline.question_lexicon import (
    FEMALE_RELATIVES,
    MALE_RELATIVES,
    RELATIVES,
    WRITER_FEMALE,
    WRITER_MALE,
)

_AGE = r"(?:\d+\s*[- ]?\s*(?:yrs?|years?|yea|y/?o)?[- ]?(?:old)?[- ]?)?"
_KIN = "|".join(sorted((re.escape(r) for r in RELATIVES), key=len, reverse=True))
_ADJ = r"(?:(?:best|little|older|younger|elder|big|baby|late|dear|elderly|sick|beloved) )?"
# "my 59 year old fiance", "my friend's wife", "a friend", "our son", "Mom" (a name: capitalised, no determiner)
RELATIVE_MENTION = re.compile(
    rf"\b(?:(?:my|our|a|the) {_AGE}{_ADJ}(?:(?:{_KIN})'s )?({_KIN})\b(?:,? (?:who is |aged? )?{_AGE}(?=\W))?"
    rf"|\b(Mom|Mum|Dad|Mother|Father|Grandma|Grandpa)\b(?! and I))", re.I)
# The writer speaking about the message rather than as the patient: "I am enquiring about my mother".
_META_I = re.compile(r"\bI(?:'m| am| was| have| just)? (?:enquiring|inquiring|asking|writing|wrote|wonder|"
                     r"need your|want to ask|have a question|realize|realise)\b", re.I)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|me|my|myself)\b")
_NAMED_PATIENT = re.compile(r"\bthe patient\b", re.I)
_LAW = re.compile(r"\b(mother|father|brother|sister|son|daughter)[- ](?:n|in)[- ]law\b", re.I)


@dataclass(frozen=True)
class Patient:
    """The person the question is about: the writer, or a relative named by `kin` ('dad', 'wife')."""

    writer: bool
    gender: str | None = None   # "male" | "female" | None when the message does not say
    kin: str | None = None

    @property
    def subject(self) -> str:
        return {"male": "he", "female": "she"}.get(self.gender or "", "the patient")

    @property
    def object(self) -> str:
        return {"male": "him", "female": "her"}.get(self.gender or "", "the patient")

    @property
    def possessive(self) -> str:
        return {"male": "his", "female": "her"}.get(self.gender or "", "the patient's")

    @property
    def reflexive(self) -> str:
        return {"male": "himself", "female": "herself"}.get(self.gender or "", "themselves")


def unify_kin(text: str) -> str:
    return _LAW.sub(lambda m: f"{m.group(1)}-in-law", text)


def _pronoun_gender(text: str) -> str | None:
    he = len(re.findall(r"\b(?:he|him|his|himself)\b", text, re.I))
    she = len(re.findall(r"\b(?:she|her|hers|herself)\b", text, re.I))
    if he == she:
        return None
    return "male" if he > she else "female"


def find_patient(narrative: str) -> Patient:
    """The relative named before the writer speaks of themself as the patient, else the writer."""
    text = unify_kin(narrative)
    mention = RELATIVE_MENTION.search(text)
    first_person = next((m for m in _FIRST_PERSON.finditer(text)
                         if not _META_I.match(text, m.start()) and not _is_relative_my(text, m)), None)
    third = _NAMED_PATIENT.search(text)
    writer_first = first_person is not None and (mention is None or first_person.start() < mention.start())
    if mention and not writer_first and not re.match(r"\s*and I\b", text[mention.end():]):
        kin = (mention.group(1) or mention.group(2)).lower()
        gender = ("male" if kin in MALE_RELATIVES else "female" if kin in FEMALE_RELATIVES
                  else _pronoun_gender(text[mention.end():]))
        return Patient(writer=False, gender=gender, kin=kin)
    if third and not writer_first:
        return Patient(writer=False, gender=_pronoun_gender(text), kin="patient")
    gender = "male" if WRITER_MALE.search(text) else "female" if WRITER_FEMALE.search(text) else None
    return Patient(writer=True, gender=gender)


def _is_relative_my(text: str, m: re.Match[str]) -> bool:
    """'my' that opens a relative mention ('my dad') is not the writer speaking as the patient."""
    return m.group(0).lower() == "my" and RELATIVE_MENTION.match(text, m.start()) is not None


# --- rewriting ---------------------------------------------------------------------------------------------------
_MODALS = {"can", "could", "should", "would", "will", "may", "might", "must", "did", "shall", "was", "were", "is",
           "are", "had", "has", "wasn't", "weren't", "isn't", "didn't", "won't", "can't", "couldn't", "shouldn't",
           "wouldn't"}
_SUBJECT_BEFORE = re.compile(r"(?:^|[,;:(]|\b(?:and|but|or|that|if|whether|because|so|when|why|what|how|where|"
                             r"is|are|was|were|do|does|did|has|have|had|can|could|should|would|will|may|might|"
                             r"must|shall))\s*$", re.I)
_NOT_VERBS = {"still", "also", "just", "really", "now", "never", "always", "often", "usually", "only", "even",
              "already", "recently", "then", "too", "ever", "actually", "currently", "constantly", "seriously",
              "not", "so", "both", "all"}
_IRREGULAR_PAST = set("""had was were did got went came took gave felt fell found made said told saw knew thought ate
    drank began became broke left lost kept spent woke ran slept sat stood heard paid put read let hit hurt cut bled
    threw wrote spoke drove brought bought caught taught held meant met sent built understood could would should
    might must can will may shall""".split())
_AGREE = {"am": "is", "have": "has", "do": "does", "'m": "is", "'ve": "has", "don't": "doesn't", "go": "goes",
          "was": "was", "haven't": "hasn't", "'d": "'d", "'ll": "'ll"}


def _third_singular(verb: str) -> str:
    low = verb.lower()
    if low in _AGREE:
        return _AGREE[low]
    if low in _IRREGULAR_PAST or low.endswith("ed") or not low.isalpha():
        return verb
    if re.search(r"(s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


def _fix_verb_after(words: list[str], i: int) -> None:
    """Agree the verb after a new third-person singular subject at `i` ('I feel' -> 'the patient feels')."""
    j = i + 1
    while j < len(words) and words[j].lower() in _NOT_VERBS:
        j += 1
    if j < len(words) and re.fullmatch(r"[A-Za-z']+", words[j]) and words[j].islower():
        words[j] = _third_singular(words[j])


_INVERTED = {"am": "is", "do": "does", "have": "has", "are": "is", "were": "was"}


def to_third_person(text: str, patient: Patient) -> str:
    """`text` with the writer's first person (when the writer is the patient) or the relative's mention (when
    not) turned into the patient's pronoun, or 'the patient' then 'they'/'their' when the sex is not said."""
    text = unify_kin(text)
    if not patient.writer and patient.kin:
        text = _replace_relative(text, patient)
        return _writer_as_family(text)
    if not patient.writer:
        return text
    text = re.sub(r"\bI'm\b", "I am", text)
    text = re.sub(r"\bI've\b", "I have", text)
    words = text.split()
    mentioned = False
    for i, raw in enumerate(words):
        core = raw.strip(".,;:!?()\"")
        if not core:
            continue
        pre, post = raw[: raw.find(core)], raw[raw.find(core) + len(core):]
        low = core.lower()
        plural = mentioned and patient.gender is None      # 'they' after a first 'the patient'
        if core == "I":
            before = words[i - 1].lower().strip(",") if i else ""
            words[i] = pre + ("they" if plural else patient.subject) + post
            if plural:
                _plural_be(words, i, before)
            elif before in _INVERTED:
                words[i - 1] = _match_case(words[i - 1], _INVERTED[before])
            elif before not in _MODALS:
                _fix_verb_after(words, i)
        elif low in _FIRST_FORMS:
            forms = _THEY_FORMS if plural else {"me": patient.object, "my": patient.possessive,
                                                 "myself": patient.reflexive, "mine": _possessive_pronoun(patient)}
            words[i] = pre + forms[low] + post
        else:
            continue
        mentioned = True
    return " ".join(words)


_FIRST_FORMS = ("me", "my", "myself", "mine")
_THEY_FORMS = {"me": "them", "my": "their", "myself": "themselves", "mine": "theirs"}


def _plural_be(words: list[str], i: int, before: str) -> None:
    """'I was' -> 'they were', 'am I' -> 'are they': other first-person verbs already agree with 'they'."""
    plural = {"am": "are", "was": "were", "'m": "are"}
    if before in plural:
        words[i - 1] = _match_case(words[i - 1], plural[before])
    if i + 1 < len(words) and words[i + 1].lower() in plural:
        words[i + 1] = plural[words[i + 1].lower()]


def _possessive_pronoun(patient: Patient) -> str:
    return {"male": "his", "female": "hers"}.get(patient.gender or "", "the patient's")


def _match_case(template: str, word: str) -> str:
    return word.capitalize() if template[:1].isupper() else word


def _replace_relative(text: str, patient: Patient) -> str:
    def repl(m: re.Match[str]) -> str:
        kin = (m.group(1) or m.group(2) or "").lower()
        if kin != patient.kin:
            return m.group(0)
        if text[m.end():m.end() + 2] == "'s":
            return patient.possessive
        return patient.subject if _SUBJECT_BEFORE.search(text[:m.start()]) else patient.object

    out = RELATIVE_MENTION.sub(repl, text)
    return re.sub(r"\b(his|her|the patient's)'s\b", r"\1", out)


def _writer_as_family(text: str) -> str:
    """The relative writing ('can I give him', 'should we be worried'): the family, not the patient."""
    text = re.sub(r"\b(?:I|we)\b(?= (?:have|do|are|am|were)\b)", "the family", text)
    text = re.sub(r"\bthe family (have|do|are|am|were)\b",
                  lambda m: "the family " + {"have": "has", "do": "does", "are": "is", "am": "is",
                                             "were": "was"}[m.group(1)], text)
    text = re.sub(r"\b(?:I|we)\b", "the family", text)
    text = re.sub(r"\b(?:me|us)\b", "the family", text)
    return re.sub(r"\b(?:my|our)\b", "the family's", text)
