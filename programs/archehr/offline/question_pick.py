"""Which sentence of a patient message carries its clinical question.

Each sentence is read as a pleasantry (thanks, greetings, sign-offs), a question (a '?', a question word or
auxiliary first, or a request such as "please tell me whether ..."), or a statement. A question is generic when it
names nothing clinical and asks only for an opinion or advice ("What do you think?", "What would you recommend?"):
it then says only what kind of answer is wanted (a cause, what to do, how serious), and the question is built from
the message's clinical focus instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from programs.archehr.offline.question_lexicon import (
    BODY,
    GREETING,
    HEADS,
    SIGN_OFF,
    THANKS,
    clinical_count,
    tag_words,
)

CAUSE = "cause"
MANAGE = "manage"
CONCERN = "concern"
IDENTIFY = "identify"

_WH = r"(?:what|why|how|when|where|which|who|whom|whose)"
_AUX = (r"(?:can|could|should|would|will|shall|is|are|was|were|do|does|did|has|have|had|may|might|must|am|isn't|"
        r"aren't|wasn't|don't|doesn't|didn't|won't|can't|couldn't|shouldn't)")
_NOT_A_QUESTION_AFTER_AUX = (r"(?:told|given|taken|found|diagnosed|admitted|discharged|sent|done|put|kept|seen|"
                             r"shown|started|being|been|so|very|also|always|never|fine|ok|okay|good|\w+ed)\b")
_STARTS_QUESTION = re.compile(rf"^(?:so |but |and |also |now |ok |well |then |or )?(?:{_WH}\b|{_AUX} (?!"
                              rf"{_NOT_A_QUESTION_AFTER_AUX}))", re.I)
_KNOW = r"(?:know|understand|learn|ask)"
# Requests that carry a question: what follows them is the question itself.
REQUEST_LEAD = re.compile(
    r"^(?:so |but |and |also |now |actually |hence )?(?:(?:please|pls|plz|kindly)\s+)?(?:"
    r"(?:my|the|our) (?:main |real |only |first |actual )?question(?: (?:is|was))?\s*:?\s*(?:(?:if|whether)\b)?|"
    rf"(?:I|we)(?:'d| would| just| really)* (?:like|lke|lik|want|wanted|need|wish|would like) to {_KNOW},?\s*"
    r"(?:(?:if|whether)\b)?|"
    r"I(?: am|'m| was)? (?:just )?(?:wondering|wondered|wonder)\b,?(?: (?:if|whether)\b)?|"
    r"(?:can|could|would) you (?:please )?(?:tell|explain|let)(?: me| us)?(?: know)?(?: (?:if|whether)\b)?|"
    r"(?:can|could|would) you (?:please )?(?:give|provide|offer)(?: me| us)? (?:some |any )?(?:advice|advise|"
    r"information|info|suggestions?|help) (?:on|about|for|regarding)\b|"
    r"(?:help|help me|help us)(?: in)? (?:to )?(?:understanding|understand)\b|"
    r"(?:tell|let)(?: me| us)(?: know)?(?: (?:if|whether)\b)?|"
    r"(?:suggest|advise|advice|guide|explain|clarify)\b(?: me| us)?(?: (?:if|whether|on|about)\b)?|"
    r"any (?:idea|ideas|thoughts)(?: on| about)?|"
    r"in your (?:professional |medical )?opinion,?)\s*", re.I)
_MARKED = re.compile(rf"^(?:so |but |and |actually )?(?:(?:my|the|our) (?:main |real |only |actual )?question\b|"
                     rf"(?:I|we)(?:'d| would| just| really)* (?:like|lke|lik|want|wanted|need|wish) to {_KNOW})",
                     re.I)
# Questions that ask only for an opinion or advice; by the answer they want.
_END = r"(?=[\s,]*(?:doctor|dr|now|or not|at all|then|please)?\W*$)"
_GENERIC = re.compile(
    r"^(?:so |but |and |also |now |ok |well |then )?(?:"
    r"what (?:do|would) you (?:think|say|suggest|recommend|advi[cs]e)|what (?:is|are) your (?:thoughts|opinion)|"
    r"any (?:ideas?|thoughts|suggestions?|advi[cs]e)|(?:can|could) you (?:please )?help|please help|help me|"
    r"what (?:is|could be|might be) (?:wrong|going on|happening)|what's (?:wrong|going on|happening)|"
    r"what (?:could|might|can) (?:this|it|that) be|what (?:this|it) (?:might|could) be|"
    rf"what (?:is|was) (?:this|that|it){_END}|"
    r"what (?:could|can|might) be the (?:reason|cause)|what (?:is|are) the (?:reason|cause)s?|"
    rf"(?:is|was) (?:this|that|it) (?:normal|possible|serious|ok|okay|bad|dangerous){_END}|"
    rf"(?:is|was) (?:this|that|it) (?:a )?serious problem{_END}|(?:is|was) (?:this|that|it) something to|"
    r"should (?:I|we) (?:all )?(?:be )?(?:worried|concerned|worry|panic|freaking out)(?=\W*$|,? or not| as | "
    r"because | since )|do (?:I|we) (?:have|need) to worry(?=\W*$| as | because | since )|"
    r"what (?:else )?(?:should|can|do) (?:I|we) (?:do|be looking for|look for|expect)|what do ido|what to do|"
    r"what (?:would|do) you recommend|what (?:is|are) (?:the )?next steps?|what now|how (?:to|can I|can we) (?:help|proceed)|"
    r"(?:suggest|advi[cs]e)(?: me| us)?(?: for| on| about)?(?: (?:the )?treatment| what to do)?|"
    r"what (?:treatment|medicine|medication)s? (?:should|can|do) (?:I|we|he|she)|"
    r"kindly (?:suggest|advi[cs]e)|what (?:else )?(?:could|can|might) (?:it|this|that) be)\b", re.I)
_MANAGE = re.compile(r"\b(?:recommend|(?:should|can|do|must) (?:I|we|he|she) do|to do|ido|advi[cs]e|suggest|"
                     r"treatment|remedy|medicine|medication|next steps?|proceed)\b", re.I)
_CAUSE = re.compile(r"\b(?:reason|cause|why|wrong|going on|might be|could be)\b", re.I)
_CONCERN = re.compile(r"\b(?:normal|possible|serious|concern\w*|worr\w*|freak\w*|danger\w*|bad|ok|okay|panic)\b",
                      re.I)
_IDENTIFY = re.compile(r"\b(?:what (?:could|might|can) (?:this|it|that) be|what (?:this|it) (?:might|could) be|"
                       r"what (?:is|was) (?:this|that|it)|looking for|look for|what else)\b", re.I)
# A question tacked onto the end of a statement: "... a shadow on my brain what could this be".
_TAIL_QUESTION = re.compile(
    r"(?<=[a-z0-9)])(?<!\bor)(?<!\band)(?<!\bbut)[,]?\s+(?=(?:what (?:could|might|can) (?:this|it|that) be|"
    r"what (?:do|should|can) (?:I|we) do|what do ido|any ideas?|what do you think|"
    r"(?:is|could|can|would|does) (?:that|this|it) (?:be |mean |a |an )?"
    r"(?:a sign|sign|normal|serious|related|because|cancer|from|dangerous)|what else (?:should|could|can)|"
    r"please (?:tell|advi[cs]e|suggest|help)|(?:please )?kindly)\b)", re.I)


# "They never gave her antibiotics, is that normal?" -> "Is it normal that they never gave her antibiotics?"
_NORMAL_TAIL = re.compile(r"^([^,?]{8,}?),?\s+(?:is|was) (?:that|this|it) (normal|ok|okay|safe|right|common|usual|"
                          r"necessary)\s*\?\s*$", re.I)


def _lower_first(text: str) -> str:
    return text if text[:2].isupper() or text.startswith("I ") else text[:1].lower() + text[1:]


@dataclass(frozen=True)
class Sentence:
    text: str
    index: int
    kind: str          # "pleasantry" | "question" | "statement"
    clinical: int      # particular clinical words (symptoms, conditions, procedures, drugs, measurements)
    generic: bool = False
    intent: str = CAUSE
    marked: bool = False   # "My question is ...", "I want to know ...": the writer names it


def strip_greeting(text: str) -> str:
    return GREETING.sub("", text, count=1).strip() if GREETING.match(text) else text


def split_tail_questions(sentences: list[str]) -> list[str]:
    """A question run onto the end of a statement (no stop between) becomes its own sentence."""
    out: list[str] = []
    for s in sentences:
        s = _NORMAL_TAIL.sub(lambda m: f"Is it {m.group(2)} that {_lower_first(m.group(1))}?", s)
        starts = list(_TAIL_QUESTION.finditer(s))
        m = starts[-1] if starts else None      # the last such start
        if m and len(s[:m.start()].split()) >= 4:
            out += [s[:m.start()].rstrip(" ,") + ".", s[m.end():]]
        else:
            out.append(s)
    return out


def is_pleasantry(text: str, clinical: int) -> bool:
    if clinical:
        return False
    if THANKS.search(text) and not re.search(r"\bthank god\b", text, re.I):
        return True
    if SIGN_OFF.search(text) and len(text.split()) <= 12 and not _GENERIC.match(text):
        return True
    return not re.sub(r"[\W_]+", "", GREETING.sub("", text))


def is_question(text: str) -> bool:
    body = re.sub(r"^[\W_]+", "", text)
    return (body.rstrip().endswith("?") or bool(_STARTS_QUESTION.match(body)) or bool(REQUEST_LEAD.match(body))
            or bool(re.search(r"\bdo you think\b|\bany ideas?\b", body, re.I)))


def classify(sentences: list[str]) -> list[Sentence]:
    out = []
    for i, raw in enumerate(split_tail_questions(sentences)):
        text = strip_greeting(raw)
        clinical = clinical_count(text)
        if not text or is_pleasantry(text, clinical):
            out.append(Sentence(text, i, "pleasantry", clinical))
        elif re.match(r"^or\b", text, re.I) and out and out[-1].kind == "question":
            out.append(Sentence(text, i, "pleasantry", clinical))     # an alternative to the question before
        elif is_question(text):
            out.append(_question(text, i, clinical))
        else:
            out.append(Sentence(text, i, "statement", clinical))
    return out


def _question(text: str, index: int, clinical: int) -> Sentence:
    body = re.sub(r"^[\W_]+", "", text)
    lead = REQUEST_LEAD.match(body)
    opinion_only = bool(_GENERIC.match(body) or lead and _GENERIC.match(body[lead.end():]))
    generic = clinical == 0 and opinion_only
    asked = body[lead.end():] if lead and lead.end() < len(body) else body   # "please suggest what could be..."
    if _IDENTIFY.search(asked):
        intent = IDENTIFY
    elif _MANAGE.search(asked) or asked is not body and _MANAGE.search(body) and not _CAUSE.search(asked):
        intent = MANAGE
    elif _CONCERN.search(asked):
        intent = CONCERN
    else:
        intent = CAUSE
    return Sentence(text, index, "question", clinical, generic, intent, bool(_MARKED.match(text)))


def names_anything(text: str) -> bool:
    """Any clinical word at all, even a general one ('the medicines', 'his leg')."""
    return any(k in HEADS or k == BODY for k in tag_words(text.split()))


_WRITER_SUBJECT = re.compile(r"\b(?:can|could|should|do|must|may|shall) (?:I|we)\b(?! give)|\b(?:I|we) (?:can|could|should|"
                             r"must|have to|need to)\b", re.I)


def choose(sentences: list[Sentence], writer_is_patient: bool = True) -> Sentence | None:
    """The main clinical question: the one the writer marks, else the one naming the most particular clinical
    things (capped, so a long story sentence with a '?' does not win on length), a relative's own to-do question
    ('How can I take care of him?') after questions about the patient, the earliest on ties; a generic question
    only when no question names anything; None when the message asks nothing."""
    questions = [s for s in sentences if s.kind == "question"]
    specific = [s for s in questions if not s.generic]
    if specific:
        best = max(specific, key=lambda s: (s.marked, writer_is_patient or not _WRITER_SUBJECT.search(s.text),
                                            min(s.clinical, 3), -s.index))
        if (best.clinical or names_anything(best.text) or not _WRITER_SUBJECT.search(best.text)
                or not any(s.generic for s in questions)):
            return best     # a question naming nothing clinical ('shall we see another doctor?') yields to
                            # an opinion question that the message's focus can fill
    generic = [s for s in questions if s.generic]
    return generic[-1] if generic else None
