"""A patient's question made short the way a clinician shortens it: drop the request around it ("My question is
if ..."), fillers and hedges ("really", "do you think"), asides and side clauses, never cut at word 15."""

from __future__ import annotations

import re

from programs.archehr.offline.question_lexicon import HEADS, tag_words
from programs.archehr.offline.question_pick import REQUEST_LEAD

_DISCOURSE = re.compile(r"^(?:(?:so|but|and|also|now|ok|okay|well|then|fine|actually|anyway|plus|sir|doctor|dr|"
                        r"hi|hello)\b[,.:]?\s+)+", re.I)
_CONCESSION = re.compile(r"^(?:I (?:realize|realise|know|understand|am aware)|(?:even )?though|although|while)\b"
                         r"[^,?]*,\s*(?:but\s+)?", re.I)
_FILLERS = [
    r"\bdo you think(?: that)?\b", r"\bin your (?:professional |medical )?opinion\b", r"\b(?:would|do) you say\b",
    r"\bI (?:think|believe|guess|mean|feel like)\b(?= \w+ (?:is|are|was|could|might|can))", r"\byou know\b",
    r"\breally\b", r"\bjust\b", r"\bactually\b", r"\bbasically\b", r"\bperhaps\b", r"\btotally\b",
    r"\bhonestly\b", r"\bplease\b", r"\bpls\b", r"\bkindly\b", r"\bat this point\b", r"\bby then\b", r"\bsir\b",
    r"\bof course\b", r"\bsomehow\b", r"\bin general\b", r"\bthough\b(?=\s*\?$)", r"(?<=\s)doctor(?=\s*\?$)",
    r"\bat all\b(?=\s*\?$)", r"\bnow\b(?=\s*\?$)", r"\ball\b(?= (?:be|freaking|worry))",
    r"\bmost likely\b", r"\bin any way\b", r"\bso far\b",
]
_FILLER = re.compile("|".join(_FILLERS), re.I)
_AUX = {"is", "are", "was", "were", "can", "could", "will", "would", "should", "has", "have", "had", "does", "do",
        "did", "may", "might", "must", "shall"}
_SUBJECT_START = re.compile(r"^(?:he|she|it|this|that|these|they|there|the|his|her|my|their|a|an|I|we|you|"
                            r"mom|dad|[a-z]+'s)\b", re.I)
# Side clauses a clinician's question leaves out: "..., which ...", "..., since ...".
_SIDE_CLAUSE = re.compile(r",\s*(?:which|who|since|as|because|even though|although|though|while|when|after|"
                          r"before|but|so|and then|that is|i\.e\.|e\.g\.)\b[^,?]*", re.I)
_PARENTHESES = re.compile(r"\s*\([^)]*\)")
_DROPPABLE = {"very", "so", "too", "quite", "extremely", "some", "any", "completely", "always", "still", "ever",
              "also", "even", "currently", "recently", "sometimes", "again", "already", "only", "much", "many",
              "lot", "lots", "alot", "suddenly", "possibly", "probably", "certain", "specific", "other", "such",
              "particular", "overall", "further"}


_CONDITIONAL = re.compile(r"^if\s+((?:\S+\s+){2,}?\S+?),?\s+((?:(?:why|how|what|when)\s+)?(?:does|do|did|is|are|was|"
                          r"were|can|could|will|would|should)\s+(?:not\s+)?(?:the|he|she|it|this|that|they|I|my|his|"
                          r"her|there)\b.*)$", re.I)
# "Six weeks seems like forever, why can't he take pills?": the statement before the question goes.
_LEADING_STATEMENT = re.compile(r"^(?!(?:why|what|how|when|where|which|who|can|could|should|is|are|was|were|do|does|"
                                r"did|will|would|if)\b)[^,?]{3,},\s*(?=(?:why|what|how|when|where)\b|(?:is|are|does|"
                                r"do|can|could|should|will|would) (?:it|this|that|there|I|he|she|we|they)\b)", re.I)
# ", I thought antibiotics kill infections": the writer's own aside after the question.
_WRITER_ASIDE = re.compile(r",?\s+(?:I|we) (?:thought|think|read|heard|was told|were told|know|knew|believe|"
                           r"understand|realize|guess)\b.*$", re.I)
PATIENT = "<patient>"      # stands for the patient's subject pronoun until the person step fills it
_WHAT_ABOUT = re.compile(r"^what (?:would|do|can) you (?:say|think|tell me) (?:about|of) (.+)$", re.I)
_THINK_LEAD = re.compile(r"^(?:do|would) you (?:think|say|believe|feel)(?: that)?\s+", re.I)


def strip_request(text: str) -> tuple[str, bool]:
    """The question inside a request ('Please suggest whether it can be cured' -> 'it can be cured'); True when
    what is left is a yes/no question in statement order (it followed 'if', 'whether' or 'do you think')."""
    text = _DISCOURSE.sub("", text.strip())
    m = REQUEST_LEAD.match(text)
    embedded = False
    if m and m.end() < len(text):
        embedded = bool(re.search(r"\b(?:if|whether)\s*$", m.group(0), re.I)) or not _starts_question(text[m.end():])
        text = text[m.end():]
        if re.search(r"\bif\s*$", m.group(0), re.I):
            text = "if " + text
    text = _DISCOURSE.sub("", text)
    text = _CONCESSION.sub("", text)
    text = _LEADING_STATEMENT.sub("", text)
    aside = _WRITER_ASIDE.search(text)
    if aside and len(text[:aside.start()].split()) >= 4:
        text = text[:aside.start()]
    about = _WHAT_ABOUT.match(text)
    if about:       # "What would you say about cancer in the stomach?" asks whether it could be that
        return f"could {PATIENT} have {about.group(1)}", False
    think = _THINK_LEAD.match(text)
    if think:
        text, embedded = text[think.end():], True
    conditional = _CONDITIONAL.match(text)
    if conditional:     # "if the sludge was there does the medication help" keeps its condition
        return f"If {conditional.group(1).rstrip(',')}, {conditional.group(2)}", False
    text = re.sub(r"^(?:if|whether)\s+", "", text, flags=re.I)
    return text.strip(" ,:;-"), embedded


def _starts_question(text: str) -> bool:
    first = text.split(maxsplit=1)[0].lower() if text.split() else ""
    return first in _AUX or first in {"what", "why", "how", "when", "where", "which", "who", "whose"}


# Modals as patients text them ("he mte be able"): read as the modal before inverting.
_MODAL_SPELLINGS = {"mte": "might", "mite": "might", "mght": "might", "wil": "will", "wud": "would",
                    "shud": "should", "shld": "should", "cud": "could", "cld": "could", "cn": "can"}


def invert(text: str, past: bool = False) -> str:
    """A yes/no question in statement order made a question: 'this can be cured' -> 'can this be cured',
    'mom need to be on aspirin' -> 'does mom need to be on aspirin'; left as is when no verb is found."""
    words = [_MODAL_SPELLINGS.get(w.lower(), w) for w in text.split()]
    if not words or not _SUBJECT_START.match(text) or words[0].lower() in _AUX:
        return text
    for i in range(1, min(6, len(words))):
        w = words[i].lower()
        if w in _AUX:
            return " ".join([w] + words[:i] + words[i + 1:])
        if w in {"and", "or", ","} or words[i - 1].endswith(","):
            break
        if i <= 2 and re.fullmatch(r"(?:need|want|have|feel|get|take|fail|go|keep|seem|look)", w):
            return " ".join(["did" if past else "does"] + words)
    return text


_TRAILING_SIGN_OFF = re.compile(r"[,.]?\s+(?:(?:do|please|pls|kindly)\s+)?(?:reply|respond|answer|help)(?: me| us)?"
                                r"(?: asap| soon| quickly| fast)?\W*$|[,.]?\s+(?:many )?(?:thanks?|thank you|thankyou)\b.*$",
                                re.I)


def drop_fillers(text: str) -> str:
    text = _TRAILING_SIGN_OFF.sub("", text)
    text = _FILLER.sub("", text)
    text = re.sub(r"\s+([,?.])", r"\1", text)
    text = re.sub(r",\s*,", ",", text)
    return " ".join(text.split()).strip(" ,")


def _clinical_weight(chunk: str) -> int:
    return sum(1 for k in tag_words(chunk.split()) if k in HEADS)


def fit(text: str, max_words: int) -> str | None:
    """At most `max_words` words by dropping, in turn: parentheses, side clauses, the less clinical of two
    alternatives or comma chunks, then modifiers and fillers; None when that is not enough (the caller asks about
    the message's focus instead of cutting a sentence mid-way)."""
    text = " ".join(text.split())
    if _count(text) <= max_words:
        return text
    text = drop_side_clauses(_PARENTHESES.sub("", text), max_words)
    if _count(text) <= max_words:
        return text
    text = _keep_clinical_chunks(text, max_words)
    if _count(text) <= max_words:
        return text
    words = [w for w in text.split() if w.lower().strip(",") not in _DROPPABLE]
    return " ".join(words) if len(words) <= max_words else None


def drop_side_clauses(text: str, max_words: int) -> str:
    """Side clauses (', which ...', ', since ...'), last first, until `text` fits; one naming two or more clinical
    things stays unless what is before it already makes a question of five words."""
    dropped = False
    for m in reversed(list(_SIDE_CLAUSE.finditer(text))):
        if _count(text) <= max_words:
            break
        if _clinical_weight(m.group(0)) <= 1 or _count(text[:m.start()]) >= 5:
            text = text[:m.start()] + text[m.end():]
            dropped = True
    if not dropped:
        return text
    # "the swelling in my knee, is normal": the subject and its verb meet again
    return re.sub(r",\s*(?=(?:is|are|was|were|can|could|will|would|has|have|does|do)\b)", " ", text)


def _count(text: str) -> int:
    return len(text.split())


def _keep_clinical_chunks(text: str, max_words: int) -> str:
    """Split on commas, ';' and ' or ' (alternatives); keep the first chunk (it holds the question word) and then
    the most clinical chunks, in their order, while they fit."""
    parts = [p.strip() for p in re.split(r",|;|\s(?=or\s)", text) if p.strip()]
    if len(parts) < 2:
        return text
    head, rest = parts[0], parts[1:]
    ranked = sorted(range(len(rest)), key=lambda i: (-_clinical_weight(rest[i]), i))
    keep: set[int] = set()
    total = _count(head)
    for i in ranked:
        n = _count(rest[i])
        if total + n <= max_words and _clinical_weight(rest[i]) > 0:
            keep.add(i)
            total += n
    pieces = [head] + [rest[i] for i in sorted(keep)]
    return ", ".join(pieces).replace(", or ", " or ")
