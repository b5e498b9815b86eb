"""The clinical focus of a patient message: its symptom, condition, procedure and drug phrases.

A phrase is a run of clinical words ("lower left abdominal pain", "enlarged spleen and kidney") found with the
word lists; the focus fills a vague question ("Could this be cancer?" -> "Could his enlarged spleen and kidney be
cancer?") and builds one when the message asks none ("What is causing his cough and shortness of breath?").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

from programs.archehr.offline.question_lexicon import (
    AS_NOUN,
    BODY,
    CONDITION,
    DRUG,
    HEADS,
    MEASURE,
    MODIFIER,
    PROCEDURE,
    SYMPTOM,
    TEST,
    WEAK,
    WORDS_OF_KINDS,
    canonical,
    tag_words,
)

_LEAD_MARKS = ".,;:!?()[]{}\"'*~`<>=+_-"
_TRAIL_MARKS = ".,;:!?()[]{}\"*~`<>=+_"
FINDING = "finding"       # a modifier on a body part or measure: "enlarged spleen", "low blood pressure"
# Words that may sit inside a phrase between two clinical words ("pain in his chest", "spleen and kidney").
_JOINERS = {"and", "&", "of", "in", "the", "his", "her", "my", "their", "from", "with", "on", "/", "to", "a"}
_EDGE_DROP = _JOINERS | {"dangerously", "heavy", "so", "very", "multiple", "several", "many", "some"}


@dataclass(frozen=True)
class Phrase:
    text: str
    kinds: frozenset[str]
    sentence: int        # index of the sentence it came from
    heads: int           # clinical head words in it
    head: str            # its last clinical head word, lower case and singular ("pain" in "lower abdominal pain")
    core: str = ""       # the phrase up to that head word ("headache pain" of "headache pain in left temple")
    negated: bool = False   # "no fever", "didn't have an infection", "ruled out appendicitis"

    @property
    def kind(self) -> str:
        for k in (SYMPTOM, CONDITION, FINDING, MEASURE, PROCEDURE, DRUG, TEST):
            if k in self.kinds:
                return k
        return BODY


def phrases_of(sentence: str, index: int = 0) -> list[Phrase]:
    """Runs of clinical words in `sentence` naming a symptom, condition, procedure, test, drug, measurement or a
    finding (a modifier on a body part); joiners are kept only between clinical words."""
    words = [w for w in re.split(r"\s+", sentence) if w]
    clean = [w.lstrip(_LEAD_MARKS).rstrip(_TRAIL_MARKS) for w in words]
    kinds = tag_words(clean)
    out: list[Phrase] = []
    i = 0
    while i < len(words):
        if kinds[i] is None:
            i += 1
            continue
        j = _phrase_end(words, clean, kinds, i)
        phrase = _phrase(clean, kinds, list(range(i, j + 1)), index)
        if phrase and _negated(clean, i):
            phrase = replace(phrase, negated=True)
        if phrase:
            out.append(phrase)
        i = j + 1
    return out


def _phrase_end(words: list[str], clean: list[str], kinds: list[str | None], i: int) -> int:
    j = i
    while j + 1 < len(words) and not _breaks(words[j]):
        if kinds[j + 1] is not None:
            j += 1
            continue
        k = j + 1     # a run of joiners then a clinical word continues the phrase
        while k < len(words) and clean[k].lower() in _JOINERS and not _breaks(words[k]):
            k += 1
        if k < len(words) and k > j + 1 and kinds[k] is not None:
            j = k
            continue
        break
    return j


def _phrase(clean: list[str], kinds: list[str | None], span: list[int], index: int) -> Phrase | None:
    while span and clean[span[0]].lower() in _EDGE_DROP:
        span.pop(0)
    while span and (clean[span[-1]].lower() in _EDGE_DROP or kinds[span[-1]] == MODIFIER):
        span.pop()
    head_at = [s for s in span if kinds[s] in HEADS]
    found = {k for s in span if (k := kinds[s])}
    if not head_at and MODIFIER in found and BODY in found:
        found.add(FINDING)
        head_at = [s for s in span if kinds[s] == BODY]
    if not head_at and BODY in found:      # a body part alone ("the gallbladder"), for 'it' to stand for
        head_at = [s for s in span if kinds[s] == BODY]
        return Phrase(" ".join(clean[s] for s in span), frozenset(found), index, 0,
                      singular(clean[head_at[-1]].lower()), "") if head_at else None
    if not span or not head_at:
        return None
    text = " ".join(_inner_article(canonical(clean[s]), n) for n, s in enumerate(span))
    heads = sum(1 for s in head_at if canonical(clean[s]).lower() not in WEAK)
    core = " ".join(_inner_article(canonical(clean[s]), n) for n, s in enumerate(span) if s <= head_at[-1])
    return Phrase(text, frozenset(found), index, heads, singular(canonical(clean[head_at[-1]]).lower()), core)


def singular(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "is", "us")) else word


_NEGATION = re.compile(r"\b(?:no|not|never|without|didn't|didnt|don't|dont|doesn't|isn't|wasn't|ruled out|"
                       r"negative for|free of)\b", re.I)


_NEGATION_GAP = {"have", "has", "had", "any", "a", "an", "the", "signs", "sign", "of", "show", "showed", "find",
                 "found", "get", "got", "be", "been", "is", "was", "for"}


def _negated(clean: list[str], i: int) -> bool:
    """'no fever', "didn't have an infection": a negation before the phrase with only such words between."""
    j = i - 1
    while j >= 0 and i - j <= 4 and clean[j].lower() in _NEGATION_GAP:
        j -= 1
    return j >= 0 and i - j <= 4 and bool(_NEGATION.fullmatch(clean[j]) or _NEGATION.fullmatch(
        " ".join(clean[max(0, j - 1):j + 1])))


def _inner_article(word: str, position: int) -> str:
    """'shadow on my brain' -> 'shadow on the brain': the patient's possessive is added once, up front."""
    return "the" if position and word.lower() in {"my", "his", "her", "their"} else word


def _breaks(word: str) -> bool:
    """A word ending a clause ('pain,' 'stones.') ends the phrase too."""
    return bool(re.search(r"[.,;:!?)]$", word))


def strip_possessive(phrase: str) -> str:
    """'his lungs' -> 'lungs': the caller adds the patient's possessive once."""
    return re.sub(r"^(?:his|her|my|their|the|a|an)\s+", "", phrase, flags=re.I)


_AS_NOUN = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, AS_NOUN), key=len, reverse=True)) + r")\b")


def as_named(phrase: str) -> str:
    """A phrase as a clinician names it: symptom adjectives as nouns ('weak' -> 'weakness'), lower case except
    acronyms ('AKI')."""
    words = strip_possessive(phrase).split()
    words = [w if (w.isupper() and len(w) > 1) else w.lower() for w in words]
    return _AS_NOUN.sub(lambda m: AS_NOUN[m.group(0)], " ".join(words))


def rank_focus(phrases: list[Phrase], kinds: tuple[str, ...], limit: int, max_words: int) -> list[Phrase]:
    """The message's main complaints of the wanted kinds: phrases whose head word the message repeats most
    ('pain' told three ways), then the latest (the complaint that brought the question); one phrase per head (its
    longest wording), in reading order."""
    wanted = [p for p in phrases if p.kind in kinds and p.heads and not p.negated]
    if not wanted:
        return []
    mentions = Counter(p.head for p in wanted)
    by_head: dict[str, Phrase] = {}
    for p in wanted:
        best = by_head.get(p.head)
        if best is None or (len(p.text.split()) > len(best.text.split()) and len(p.text.split()) <= 5):
            by_head[p.head] = p
    ranked = sorted(by_head.values(), key=lambda p: (-mentions[p.head], -p.sentence))
    return _within(ranked, limit, max_words)


def nearest(phrases: list[Phrase], kinds: tuple[str, ...], limit: int, max_words: int,
            last: bool = False) -> list[Phrase]:
    """The phrases of the wanted kinds in the latest sentence that has any, in reading order (only its last
    one with `last`: the thing just named)."""
    wanted = [p for p in phrases if p.kind in kinds and (p.heads or p.kind == BODY) and not p.negated]
    if not wanted:
        return []
    latest = max(p.sentence for p in wanted)
    found = [p for p in wanted if p.sentence == latest]
    return _within(found[-1:] if last else found, limit, max_words)


def _within(phrases: list[Phrase], limit: int, max_words: int) -> list[Phrase]:
    """Up to `limit` phrases in `max_words` words, none repeating another's head word; a phrase too long is
    trimmed after its head ('headache pain in left temple' -> 'headache pain')."""
    chosen: list[Phrase] = []
    named: set[str] = set()
    words = 0
    for p in phrases:
        room = max_words - words
        if len(p.text.split()) > room and p.core and p.core != p.text:
            p = replace(p, text=p.core)
        if len(p.text.split()) > room and re.search(r"\s(?:and|&)\s", p.text):
            p = replace(p, text=_leading_parts(p.text, room))
        if p.head in named:
            continue
        parts = [t for t in re.split(r"\s+(?:and|&)\s+", p.text) if not {singular(w) for w in t.lower().split()}
                 & named & _HEAD_WORDS]     # "fever and headache" after "high fever": only "headache"
        if parts and len(parts) < len(re.split(r"\s+(?:and|&)\s+", p.text)):
            p = replace(p, text=" and ".join(parts))
        key = as_named(p.text)
        n = len(key.split())
        if words + n > max_words:
            continue
        chosen.append(p)
        named |= {singular(w) for w in key.lower().split()}
        words += n
        if len(chosen) == limit:
            break
    return sorted(chosen, key=lambda p: p.sentence)


_HEAD_WORDS = {singular(w) for w in WORDS_OF_KINDS}


def _leading_parts(text: str, room: int) -> str:
    """'rash on the arms and a high fever' in 5 words -> 'rash on the arms': whole items of a list only."""
    kept: list[str] = []
    for part in re.split(r"\s+(?:and|&)\s+", text):
        if len(" and ".join(kept + [part]).split()) > room:
            break
        kept.append(part)
    return " and ".join(kept) if kept else text


def join_phrases(phrases: list[Phrase]) -> str:
    """'cough', 'fever and headache' -> 'cough, fever and headache': one list, each item named once."""
    items: list[str] = []
    for p in phrases:
        for part in re.split(r"\s+(?:and|&)\s+", as_named(p.text)):
            part = strip_possessive(part)
            if part and part not in items:
                items.append(part)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


SYMPTOM_KINDS = (SYMPTOM,)
FOCUS_KINDS = (SYMPTOM, CONDITION, FINDING, MEASURE)
ANY_KINDS = (SYMPTOM, CONDITION, FINDING, MEASURE, PROCEDURE, DRUG, TEST)
DRUG_KINDS = (DRUG,)
