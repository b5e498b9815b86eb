"""Perturbations that turn a supported answer sentence into one that misstates its note, by one fact: the LM judge's
training examples (judge.py). The word pairs are general English and clinical usage, not from any evaluation text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from programs.archehr.grounding.verdicts import NOT_IN_NOTE

CONFLICT_KINDS = ("negation", "direction", "quantity", "side/site", "reason/attribution", "time/order")


def _swap_pairs(pairs: list[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for a, b in pairs:
        out.setdefault(a, b)
        out.setdefault(b, a)
    return out


_DIRECTION = _swap_pairs([
    ("increased", "decreased"), ("increase", "decrease"), ("increasing", "decreasing"), ("rose", "fell"),
    ("rising", "falling"), ("risen", "fallen"), ("higher", "lower"), ("high", "low"), ("improved", "worsened"),
    ("improving", "worsening"), ("improve", "worsen"), ("better", "worse"), ("up", "down"), ("more", "less"),
    ("gained", "lost"), ("raised", "lowered"), ("stronger", "weaker"), ("faster", "slower"), ("grew", "shrank"),
    ("above", "below"), ("larger", "smaller"), ("elevated", "reduced"), ("worse", "better"), ("climbed", "dropped"),
    ("rises", "falls"), ("went up", "went down"), ("resolved", "persisted"), ("shrinking", "growing"),
    ("widened", "narrowed"), ("dilated", "constricted"), ("tachycardia", "bradycardia"),
    ("hypertension", "hypotension"), ("hyperkalemia", "hypokalemia"), ("hypernatremia", "hyponatremia"),
    ("hyperglycemia", "hypoglycemia"), ("started", "stopped"), ("restarted", "held"), ("continue", "stop"),
])
_SIDE = _swap_pairs([
    ("left", "right"), ("upper", "lower"), ("anterior", "posterior"), ("front", "back"), ("proximal", "distal"),
    ("inner", "outer"), ("arm", "leg"), ("arms", "legs"), ("hand", "foot"), ("hands", "feet"), ("knee", "elbow"),
    ("hip", "shoulder"), ("wrist", "ankle"), ("kidney", "liver"), ("lung", "heart"), ("lungs", "kidneys"),
    ("stomach", "bowel"), ("bladder", "gallbladder"), ("chest", "belly"), ("neck", "back"), ("brain", "spine"),
    ("both", "one"), ("bilateral", "left-sided"),
])
_ORDER = _swap_pairs([
    ("before", "after"), ("first", "last"), ("earlier", "later"), ("prior to", "following"), ("until", "after"),
    ("preceded", "followed"), ("already", "not yet"), ("hours", "days"), ("days", "weeks"), ("weeks", "months"),
    ("months", "years"), ("daily", "weekly"), ("morning", "evening"), ("yesterday", "tomorrow"),
])
_NEGATION_DROP = [(r"\b(did|does|do|could|can|should|would|will|was|were|is|are|has|had|have) not\b", r"\1"),
                  (r"\b(did|does|do|could|ca|should|would|wo|was|were|is|are|has|had|have)n't\b", r"\1"),
                  (r"\bno longer\b", "still"), (r"\bno\b", "a"), (r"\bwithout\b", "with"), (r"\bnever\b", "once"),
                  (r"\bnormal\b", "abnormal"), (r"\bnegative\b", "positive"), (r"\bunlikely\b", "likely"),
                  (r"\bnone\b", "some"), (r"\bruled out\b", "confirmed"), (r"\babsent\b", "present")]
_NEGATION_ADD = [(r"\b(was|were|is|are)\b(?! not)", r"\1 not"), (r"\b(showed|shows|found|had|has|needs|needed)\b",
                                                                  r"\1 no"),
                 (r"\b(can|could|should|will|would|did|does)\b(?! not)", r"\1 not"), (r"\babnormal\b", "normal"),
                 (r"\bpositive\b", "negative"), (r"\blikely\b", "unlikely"), (r"\bconfirmed\b", "ruled out"),
                 (r"\bwith\b", "without"), (r"\bpresent\b", "absent")]
_REASON = re.compile(r"\b(because of|because|due to|since|as a result of|caused by|so that|to prevent|to treat)\b"
                     r"\s+([^,.;]+)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)?)(?![\w])")
_NUMBER_WORDS = _swap_pairs([("one", "two"), ("two", "three"), ("three", "four"), ("four", "six"), ("five", "ten"),
                             ("once", "twice"), ("twice", "three times"), ("single", "double"), ("half", "double")])
_THEN = re.compile(r"^(.*?)(,? (?:and )?then |, followed by |, and later |, after which )(.*?)([.!?]?)$")


def _swap_one(text: str, table: dict[str, str], rng: random.Random) -> str | None:
    keys = sorted(table, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in keys) + r")\b", re.IGNORECASE)
    hits = list(pattern.finditer(text))
    if not hits:
        return None
    hit = rng.choice(hits)
    new = table[hit.group(0).lower()]
    new = new.capitalize() if hit.group(0)[:1].isupper() else new
    return text[: hit.start()] + new + text[hit.end():]


def negation(text: str, rng: random.Random) -> str | None:
    options = [(p, r) for p, r in _NEGATION_DROP if re.search(p, text, re.IGNORECASE)]
    if not options:
        options = [(p, r) for p, r in _NEGATION_ADD if re.search(p, text, re.IGNORECASE)]
    if not options:
        return None
    pattern, repl = rng.choice(options)
    out = re.sub(pattern, repl, text, count=1, flags=re.IGNORECASE)
    return out if out != text else None


def direction(text: str, rng: random.Random) -> str | None:
    span = re.search(r"\bfrom (\S+(?: \w+)?) to (\S+(?: \w+)?)", text)
    if span and rng.random() < 0.5:  # "from 212 to 199" -> "from 199 to 212"
        a, b = span.group(1), span.group(2).rstrip(".,;")
        return text[: span.start()] + f"from {b} to {a}" + text[span.start() + len(f"from {a} to {b}"):]
    return _swap_one(text, _DIRECTION, rng)


def quantity(text: str, rng: random.Random) -> str | None:
    numbers = list(_NUMBER.finditer(text))
    if numbers and rng.random() < 0.75:
        hit = rng.choice(numbers)
        value = float(hit.group(1).replace(",", ""))
        new = value * rng.choice([2, 3, 0.5, 10, 0.1]) if value else rng.choice([1, 2, 5])
        if new == value:
            new = value + 1
        shown = f"{new:.1f}".rstrip("0").rstrip(".") if "." in hit.group(1) or new != int(new) else str(int(new))
        return text[: hit.start(1)] + shown + text[hit.end(1):]
    return _swap_one(text, _NUMBER_WORDS, rng) or (
        re.sub(r"\bmg\b", "g", text, count=1) if re.search(r"\bmg\b", text) else None)


def reason(text: str, rng: random.Random, foreign: list[str]) -> str | None:
    """The reason clause replaced by another sentence's (or one appended): an invented reason or attribution."""
    others = [m.group(2) for t in foreign for m in _REASON.finditer(t) if len(m.group(2).split()) >= 2]
    if not others:
        return None
    new = rng.choice(others)
    hit = _REASON.search(text)
    if hit and len(hit.group(2).split()) >= 2:
        return text[: hit.start(2)] + new + text[hit.end(2):]
    stem = text.rstrip(" .!?")
    return f"{stem} because {new}."


def order(text: str, rng: random.Random) -> str | None:
    then = _THEN.match(text)
    if then and then.group(1) and then.group(3) and rng.random() < 0.6:
        first, joint, second, end = then.groups()
        return f"{second[:1].upper()}{second[1:]}{joint}{first[:1].lower()}{first[1:]}{end or '.'}"
    day = re.search(r"\b(day|week|month|hour|postoperative day|POD) (\d+)\b", text, re.IGNORECASE)
    if day and rng.random() < 0.5:
        n = int(day.group(2))
        return text[: day.start(2)] + str(n + rng.choice([-2, 2, 3, 5]) if n > 2 else n + 3) + text[day.end(2):]
    return _swap_one(text, _ORDER, rng)


def invented_addition(text: str, rng: random.Random, foreign: list[str]) -> str | None:
    """A clause from another case's answer joined to this one: a fact the note does not hold."""
    if not foreign:
        return None
    clause = rng.choice(foreign).rstrip(" .!?")
    clause = clause[:1].lower() + clause[1:]
    return f"{text.rstrip(' .!?')}, and {clause}."


PERTURBATIONS: dict[str, Callable[[str, random.Random], str | None]] = {
    "negation": negation, "direction": direction, "quantity": quantity,
    "side/site": lambda text, rng: _swap_one(text, _SIDE, rng), "time/order": order,
}


def perturb(text: str, kind: str, rng: random.Random, foreign: list[str]) -> str | None:
    """`text` with one fact of `kind` changed (None when it has none to change, or the change is no change)."""
    if kind == NOT_IN_NOTE:
        out = invented_addition(text, rng, foreign)
    elif kind == "reason/attribution":
        out = reason(text, rng, foreign)
    else:
        out = PERTURBATIONS[kind](text, rng)
    if out is None or out.strip().lower() == text.strip().lower():
        return None
    return out
