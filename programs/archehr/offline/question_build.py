"""The steps of the rule question stage, from a patient message to one clinician-style question."""

from __future__ import annotations

import re
from dataclasses import dataclass

from programs.archehr.offline.question_focus import (
    ANY_KINDS,
    DRUG_KINDS,
    FINDING,
    FOCUS_KINDS,
    SYMPTOM_KINDS,
    Phrase,
    as_named,
    join_phrases,
    nearest,
    phrases_of,
    rank_focus,
)
from programs.archehr.offline.question_lexicon import (
    BODY,
    CONDITION,
    DRUG,
    EVENT_HEADS,
    MEASURE,
    PROCEDURE,
    SYMPTOM,
    TEST,
    clinical_count,
    tag_words,
)
from programs.archehr.offline.question_person import Patient, find_patient, to_third_person
from programs.archehr.offline.question_pick import CONCERN, IDENTIFY, MANAGE, Sentence, choose, classify
from programs.archehr.offline.question_shorten import (
    PATIENT,
    drop_fillers,
    drop_side_clauses,
    fit,
    invert,
    strip_request,
)
from programs.archehr.offline.question_text import as_question, split_message
from programs.archehr.offline.question_voice import necessity, passive

# "this", "that", "them" standing for something named earlier ("Could this be cancer?", "relieve them").
_SLOT = re.compile(r"\b(this|that|these|them)\b(?=\s+(?:be|is|was|are|were|mean|means|have|has|cause|causes|"
                   r"happen\w*|might|could|can|will|would|should|related|normal|serious|a sign|possible|"
                   r"something|from|caused|necessary|needed|required|safe)\b|\s*[?.,]?\s*$|\s+or\b)|"
                   r"\bit\b(?=\s+(?:be |is )?(?:a sign|related|from|because|serious|normal|cancer|caused)\b(?!.*\bto \w+))", re.I)
_DONE_TO = re.compile(r"\s+(?:really\s+)?(?:necessary|needed|required|safe)\b", re.I)
# "her situation", "his condition": the patient's state, named by the message's focus.
_STATE_SLOT = re.compile(r"\b(?:his|her|my|their|the patient's) (?:situation|condition|state|case|illness)\b",
                         re.I)
_EXPLAINED = re.compile(r"^\W*\w+\s+(?:be |have )?(?:from|caus\w*|related|happen\w*|because)", re.I)
# "this invasive, risky procedure", "the medicine": a thing named earlier by its kind.
_THING_SLOT = re.compile(r"\b(?:this|that|these|those)\s+(?:[\w-]+,?\s+){0,3}?(procedure|surgery|operation|test|"
                         r"medicine|medication|drug|pills?|shots?|injections?|treatment)\b", re.I)
OBJECT_KINDS = (DRUG, PROCEDURE, BODY)
_TO_DO = re.compile(r"\b(?:should|can|do|must) (?:I|we|he|she) do\b|\bdo ido\b|\bto do\b", re.I)
# "how serious her situation is" -> "how serious is her situation"
_EMBEDDED_WH = re.compile(r"^((?:how \w+|what|which \w+|why|where|when))\s+(.+?)\s+(is|are|was|were)\s*[?.]?$", re.I)
# "double it", "take it out", "need it", "walking on it": a thing the patient was given or had done.
_OBJECT_IT = re.compile(r"\b(?:double|doubled|stop|stopped|stopping|change|changed|changing|get|got|take|took|"
                        r"taking|need|needs|use|using|give|gave|start|started|starting|continue|continuing|remove|"
                        r"removed|increase|increased|lower|lowered|on|off)\s+(it)\b", re.I)
# "what is this fluid in the lungs signify" -> "what does this fluid in the lungs signify"
_WHAT_IS_MEAN = re.compile(r"^what (?:is|are) ((?:this|these|the|that|his|her|my) .+?) (signify|mean|indicate|show)\b",
                           re.I)
_TWO_SLOT = re.compile(r"\b(?:the|these|those) two\b", re.I)
_SO_MUCH = re.compile(r"\b(give|gave|giving|take|took|taking|prescribe\w*)\s+(him|her|me|them)?\s*so much\b", re.I)
_PLAN = re.compile(r"\b(?:due|planning|plan|planned|going|supposed?|want(?:ed)?|hoping|hope|scheduled|booked|"
                   r"scared|afraid|meant) to (fly|travel|go|drive|visit|return|work|exercise)\b"
                   r"((?: (?:to|on|back to|by) (?:the |a )?[\w'-]+(?: [A-Z][\w'-]*)?)?)")
_PLAN_QUESTION = re.compile(r"\b(?:good idea|safe|ok to|okay to|alright to|fine to|allowed to)\b", re.I)
_RELATIVE_WRITER_CLAUSE = re.compile(r"\s+(?:and |but |because |as |so )?(?:I|we)\s+(?:never|have|had|am|was|"
                                     r"think|thought|know|knew|don't|didn't|feel|felt|believe|heard|read|saw|"
                                     r"really|also|can't|couldn't)\b.*$", re.I)
_CONCERN_IDIOM = re.compile(r"^(?:should|do|must) (?:I|we)(?: all)? (?:have to |need to )?(?:be )?(?:worried|"
                            r"concerned|worry|freaking out|panic)(?: about| that| as)?\s+", re.I)


@dataclass(frozen=True)
class Style:
    """The optional rewrites, each a constructor switch of RuleQuestionInterpreter (for ablation and tuning)."""

    third_person: bool = True     # the patient as subject: 'I' -> 'the patient', 'my dad' -> 'he'
    fill_vague: bool = True       # 'Could this be cancer?' -> 'Could his enlarged spleen be cancer?'
    passive: bool = True          # 'Why did they double it?' -> 'Why was it doubled?'
    add_focus: bool = True        # 'Should he go back to the ER?' -> '... for his vomiting?'


def interpret(narrative: str, marked: str, max_words: int, style: Style = Style()) -> str:
    """One clinician-style question, at most `max_words` words, ending with '?'."""
    sentences = classify(split_message(narrative))
    patient = find_patient(narrative or marked)
    marked_sentences: list[Sentence] = []
    if marked:
        marked_sentences = [Sentence(s.text, s.index + len(sentences), s.kind, s.clinical, s.generic, s.intent,
                                     s.marked) for s in classify(split_message(marked))]
        chosen = choose(marked_sentences, patient.writer)
        context = [s for s in sentences + marked_sentences if s.kind != "pleasantry"]
    else:
        chosen = choose(sentences, patient.writer)
        context = [s for s in sentences if s.kind != "pleasantry"]
    upto = chosen.index if chosen else len(sentences) + 1_000
    phrases = [p for s in context if s.index <= upto for p in phrases_of(s.text, s.index)]
    plan = _plan(narrative, phrases, patient, max_words)
    if chosen is None or chosen.generic:
        if plan and chosen is not None and chosen.intent in (MANAGE, CONCERN):
            return plan
        return _from_focus(chosen, phrases, patient, max_words)
    past = len(re.findall(r"\b(?:was|were|had|did)\b", narrative, re.I)) > len(
        re.findall(r"\b(?:is|are|has|does|am)\b", narrative, re.I))
    text = _rewrite(chosen, phrases, patient, style, past, max_words)
    if plan and _PLAN_QUESTION.search(chosen.text) and chosen.clinical == 0:
        return plan
    if style.add_focus:
        text = _add_focus(text, phrases, patient, max_words)
    # a question that cannot be shortened by dropping words is asked about the message's focus, never cut
    return _finish(text, max_words) or _from_focus(chosen, phrases, patient, max_words)


def _finish(text: str, max_words: int) -> str | None:
    short = fit(_their(text), max_words)
    return as_question(short) if short else None


def _their(text: str) -> str:
    """'What should the patient do for the patient's pain?' -> '... for their pain?'."""
    first = re.search(r"\bthe patient\b", text, re.I)
    if not first:
        return text
    return text[:first.end()] + re.sub(r"\bthe patient's\b", "their", text[first.end():])


def _rewrite(chosen: Sentence, phrases: list[Phrase], patient: Patient, style: Style, past: bool,
             max_words: int) -> str:
    text, embedded = strip_request(chosen.text)
    text = drop_side_clauses(drop_fillers(text), max_words)
    if embedded:
        text = invert(text, past)
    text = re.sub(r"\bbe cause by\b", "be caused by", text, flags=re.I)
    text = _EMBEDDED_WH.sub(r"\1 \3 \2", text)
    text = _WHAT_IS_MEAN.sub(r"what does \1 \2", text)
    earlier = [p for p in phrases if p.sentence < chosen.index]
    text = _concern_as_sign(text, earlier, patient)
    if not patient.writer:
        text = _relative_writer(text, patient)
    if chosen.clinical < 2 and style.fill_vague:
        text = _fill_slots(text, earlier, patient)
    if style.passive:
        text = necessity(passive(text))
    if style.third_person:
        text = to_third_person(text, patient)
    return text.replace(PATIENT, patient.subject)


def _concern_as_sign(text: str, earlier: list[Phrase], patient: Patient) -> str:
    """'Should I be concerned about a stroke?' after dizziness -> 'Could my dizziness be a sign of a stroke?': the
    worry asked about the complaint that raised it."""
    m = _CONCERN_IDIOM.match(text)
    if not m or CONDITION not in set(tag_words(text[m.end():].split())):
        return text
    symptoms = nearest(earlier, SYMPTOM_KINDS, limit=2, max_words=5)
    if not symptoms:
        return text
    return f"could {_possessive(patient)} {join_phrases(symptoms)} be a sign of {text[m.end():]}"


def _relative_writer(text: str, patient: Patient) -> str:
    """The writer's own words inside a question about a relative: their asides go, their worry becomes the risk
    ('should we be worried about his leg not mending' -> 'is there a risk of his leg not mending')."""
    m = _RELATIVE_WRITER_CLAUSE.search(text)
    if m and len(text[:m.start()].split()) >= 4:
        text = text[:m.start()]
    m = _CONCERN_IDIOM.match(text)
    if m:
        rest = text[m.end():]
        text = (f"is there a risk of {rest}" if re.match(r"(?:his|her|their|the)\b", rest, re.I)
                else f"is {patient.subject} at risk of {rest}")
    text = re.sub(r"\b(can|could|should|may|must) (?:I|we) (?:give|administer) (?:him|her|the patient)\b",
                  rf"\1 {patient.subject} take", text, flags=re.I)
    return re.sub(r"\b(I|we),? (?:as )?(?:his|her|their) [\w&, ]{0,25}?(?= (?:take|help|care|do|manage|handle|"
                  r"give|support|deal|look)\b)", r"\1", text, flags=re.I)


def _fill_slots(text: str, earlier: list[Phrase], patient: Patient) -> str:
    """Vague words filled with what the message named before: 'Could this be cancer?' -> 'Could his enlarged
    spleen and kidney be cancer?', 'Was this risky procedure necessary?' -> 'Was his catheterization necessary?'."""
    present = text.lower()
    fresh = [p for p in earlier if as_named(p.text).lower() not in present]
    poss = _possessive(patient)
    m = _THING_SLOT.search(text)
    if m:
        noun = m.group(1).lower()
        kinds = (DRUG_KINDS if re.match(r"medic|drug|pill|shot|inject", noun) else (TEST,) if noun == "test"
                 else (PROCEDURE,))
        found = nearest(fresh, kinds, limit=1, max_words=4)
        if found:
            return text[:m.start()] + f"{poss} {join_phrases(found)}" + text[m.end():]
    m = _STATE_SLOT.search(text)
    if m:
        found = rank_focus(fresh, FOCUS_KINDS, limit=3, max_words=7)
        if found:
            return text[:m.start()] + f"{poss} {join_phrases(found)}" + text[m.end():]
    m = _TWO_SLOT.search(text)
    if m:
        found = nearest(fresh, FOCUS_KINDS, limit=2, max_words=8)
        if found:
            return text[:m.start()] + join_phrases(found) + text[m.end():]
    m = _SO_MUCH.search(text)
    if m:
        found = nearest(fresh, DRUG_KINDS, limit=1, max_words=3)
        if found:
            return text[:m.end()] + f" {join_phrases(found)}" + text[m.end():]
    m = _OBJECT_IT.search(text)
    if m and clinical_count(text) == 0:
        on_foot = re.search(r"\b(?:walk\w*|stand\w*|step\w*|weight|bear\w*)\s+on\s+it\b", text, re.I)
        found = nearest(fresh, (BODY,) if on_foot else OBJECT_KINDS, limit=1, max_words=3, last=True)
        if found:
            return text[:m.start(1)] + f"{poss} {join_phrases(found)}" + text[m.end(1):]
    m = _SLOT.search(text)
    first = re.search(r"\b(?:this|that|these|them|it)\b", text, re.I)
    if m and first and first.start() == m.start():     # "Is this fall normal, or is it ...": 'it' has its noun
        if _DONE_TO.match(text[m.end():]):      # "Is that necessary?": a procedure, test or drug
            found = nearest(fresh, (PROCEDURE, TEST, DRUG), limit=1, max_words=4, last=True)
        else:
            kinds = ANY_KINDS if _EXPLAINED.match(text[m.start():]) else FOCUS_KINDS
            found = _symptoms_first(nearest(fresh, kinds, limit=3, max_words=6))
        if found:
            return text[:m.start()] + f"{poss} {join_phrases(found)}" + text[m.end():]
    return text


def _symptoms_first(found: list[Phrase]) -> list[Phrase]:
    symptoms = [p for p in found if p.kind == SYMPTOM]
    return symptoms or found


def _possessive(patient: Patient) -> str:
    # The writer's own 'my' is turned by the third-person step; a relative's pronoun is final already.
    return "my" if patient.writer else patient.possessive


def _add_focus(text: str, phrases: list[Phrase], patient: Patient, max_words: int) -> str:
    """A question that names nothing clinical in particular ('Should he go back to the ER?', 'Can he take
    medication?') gets the message's main complaint ('... for his vomiting and diarrhea?') when that fits; not one
    naming a drug or test (the complaint may not be what it is for) or still saying 'it' or 'that'."""
    if (set(tag_words(text.split())) & {SYMPTOM, CONDITION, MEASURE, BODY} or clinical_count(text)
            or re.search(r"\b(?:it|this|that|these|them)\b", text, re.I)
            or re.match(r"^\W*(?:what|which) (?:is|are)\b", text, re.I)):
        return text
    focus = rank_focus(phrases, (SYMPTOM, CONDITION, FINDING), limit=1, max_words=5)   # a measure alone
    if not focus:                                                                       # names no complaint
        return text
    poss = "their" if patient.gender is None and re.search(r"\bthe patient\b", text, re.I) else patient.possessive
    # an event the question follows ('after her stroke'), else a complaint it is about ('for her cough')
    after = focus[0].head in EVENT_HEADS or focus[0].kind == PROCEDURE
    addition = f" {'after' if after else 'for'} {poss} {join_phrases(focus)}"
    base = re.sub(r"[?.!\s]+$", "", text)
    return base + addition if len((base + addition).split()) <= max_words else text


def _plan(narrative: str, phrases: list[Phrase], patient: Patient, max_words: int) -> str | None:
    """'We were due to fly to the Maldives ... is this a good idea?' -> 'Is it safe for him to fly to the
    Maldives ...?': a trip or activity the writer plans, asked about as its safety."""
    m = next(iter(sorted(_PLAN.finditer(narrative), key=lambda m: m.group(1).lower() not in ("fly", "travel"))),
             None)
    if not m:
        return None
    activity = f"{m.group(1).lower()}{m.group(2)}"
    question = f"Is it safe for {patient.object} to {activity}"
    focus = rank_focus(phrases, (CONDITION, SYMPTOM), limit=1, max_words=4)
    if focus and len(question.split()) + 2 + len(focus[0].text.split()) <= max_words:
        question += f" with {patient.possessive} {join_phrases(focus)}"
    return as_question(question)


def _from_focus(chosen: Sentence | None, phrases: list[Phrase], patient: Patient, max_words: int) -> str:
    """A question built from the clinical focus, by the kind of answer the message asks for."""
    intent = chosen.intent if chosen else "cause"
    poss = patient.possessive
    focus = nearest(phrases, FOCUS_KINDS, limit=2, max_words=6) if intent == IDENTIFY else []
    if focus and focus[0].kind == SYMPTOM:     # "what could this be" after symptoms: what causes them
        intent, focus = "cause", []
    if not focus:
        focus = (rank_focus(phrases, SYMPTOM_KINDS, limit=3, max_words=7)
                 or rank_focus(phrases, FOCUS_KINDS, limit=2, max_words=6))
    if not focus:
        done = rank_focus(phrases, (PROCEDURE,), limit=1, max_words=5)
        if done:
            return as_question(f"Why did {patient.subject} need {as_named(done[0].text)}")
        return as_question({MANAGE: f"What should {patient.subject} do next",
                            CONCERN: f"How serious is {poss} condition"}.get(intent, f"What is wrong with "
                                                                                     f"{patient.object}"))
    for n in range(len(focus), 0, -1):      # fewer complaints until the question fits
        question = _template(intent, focus[:n], chosen, phrases, patient)
        done = _finish(_after_event(question, focus[:n], phrases, max_words), max_words)
        if done:
            return done
    return as_question(f"What is wrong with {patient.object}")


def _template(intent: str, focus: list[Phrase], chosen: Sentence | None, phrases: list[Phrase],
              patient: Patient) -> str:
    poss = patient.possessive
    what = join_phrases(focus)
    symptoms = focus[0].kind == SYMPTOM
    be = "are" if " and " in what else "is"
    if intent == MANAGE and chosen is not None and _TO_DO.search(chosen.text):
        return f"What should {patient.subject} do for {poss} {what}"
    if intent == MANAGE:
        return f"How should {poss} {what} be treated"
    if intent == CONCERN:
        return f"How serious {be} {poss} {what}"
    if intent == IDENTIFY and not symptoms:
        return f"What could {poss} {what} be"
    if symptoms:
        return f"What is causing {poss} {what}"
    return _condition_question(focus, phrases, patient)


def _condition_question(focus: list[Phrase], phrases: list[Phrase], patient: Patient) -> str:
    done = rank_focus(phrases, (PROCEDURE,), limit=1, max_words=4)
    if done:
        return f"Why did {patient.subject} need {as_named(done[0].text)} for {join_phrases(focus)}"
    return f"What is the cause of {patient.possessive} {join_phrases(focus)}"


def _after_event(question: str, focus: list[Phrase], phrases: list[Phrase], max_words: int) -> str:
    """'... after his bowel surgery': the earliest procedure or acute condition, told no later than the first
    complaint asked about (so 'after' is what the message says), and not the focus itself."""
    named = question.lower()
    heads = {p.head for p in focus}
    told = min(p.sentence for p in phrases if p.head in heads)
    events = [p for p in phrases if (p.kind == PROCEDURE or p.kind == CONDITION and p.head in EVENT_HEADS)
              and p.heads and not p.negated and p.sentence <= told and as_named(p.text).lower() not in named
              and p not in focus]
    events.sort(key=lambda p: (p.sentence, p.kind != PROCEDURE))
    if not events:
        return question
    event = as_named(events[0].text)
    if len(question.split()) + 1 + len(event.split()) > max_words:
        return question
    return f"{question} after {event}"
