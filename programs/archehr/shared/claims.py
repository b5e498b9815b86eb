"""What a sentence claims, read without an LM: quantities with their units, drugs, tests, negations. Used by the
grounding checks and the alignment features. Quantities match after unit conversion, within a rounding tolerance;
brand names and lab abbreviations read as generic / full names ("Eliquis" is apixaban, "Hgb" hemoglobin)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from programs.archehr.shared.clinical_lexicon import LEXICON, concepts, drug_class, words

# unit -> (dimension, factor to the dimension's base unit)
_UNITS: dict[str, tuple[str, float]] = {
    "ml": ("volume", 1.0), "cc": ("volume", 1.0), "l": ("volume", 1000.0), "liter": ("volume", 1000.0),
    "liters": ("volume", 1000.0), "litre": ("volume", 1000.0), "litres": ("volume", 1000.0),
    "mg": ("mass", 1.0), "g": ("mass", 1000.0), "gram": ("mass", 1000.0), "grams": ("mass", 1000.0),
    "mcg": ("mass", 0.001), "ug": ("mass", 0.001), "kg": ("weight", 1.0), "lb": ("weight", 0.4536),
    "lbs": ("weight", 0.4536), "pounds": ("weight", 0.4536),
    "min": ("time", 1 / 1440), "mins": ("time", 1 / 1440), "minute": ("time", 1 / 1440),
    "minutes": ("time", 1 / 1440), "h": ("time", 1 / 24), "hr": ("time", 1 / 24), "hrs": ("time", 1 / 24),
    "hour": ("time", 1 / 24), "hours": ("time", 1 / 24), "d": ("time", 1.0), "day": ("time", 1.0),
    "days": ("time", 1.0), "week": ("time", 7.0), "weeks": ("time", 7.0), "wk": ("time", 7.0),
    "wks": ("time", 7.0), "month": ("time", 30.4), "months": ("time", 30.4), "mo": ("time", 30.4),
    "yo": ("time", 365.0), "year": ("time", 365.0), "years": ("time", 365.0), "yr": ("time", 365.0), "yrs": ("time", 365.0),
    "%": ("percent", 1.0), "percent": ("percent", 1.0), "mmhg": ("pressure", 1.0), "bpm": ("rate", 1.0),
    "units": ("units", 1.0), "unit": ("units", 1.0), "cm": ("length", 10.0), "mm": ("length", 1.0),
    "feet": ("length", 304.8), "ft": ("length", 304.8), "meters": ("length", 1000.0), "m": ("length", 1000.0),
    "mg/dl": ("conc_mg", 1.0), "g/dl": ("conc_g", 1.0), "mmol/l": ("conc_mmol", 1.0), "meq/l": ("conc_mmol", 1.0),
    "ng/ml": ("conc_ng", 1.0), "u/l": ("conc_u", 1.0), "iu/l": ("conc_u", 1.0), "mg/kg": ("dose_kg", 1.0),
    "gy": ("radiation", 1.0),
}
_UNIT_PATTERN = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
_QUANTITY = re.compile(r"(?<![\d.])(\d+(?:[.,]\d+)?)"              # a number ...
                       r"(?:\s*(?:-|to)\s*(\d+(?:\.\d+)?))?"          # ... or a range ...
                       rf"(?:\s*-?\s*({_UNIT_PATTERN}))?(?![a-z0-9])",  # ... and its unit ("8-hour" too)
                       re.IGNORECASE)
_NEGATION = re.compile(r"\b(no|not|without|denies|denied|negative|never|none|neither|nor|unremarkable|absent|"
                       r"free of|ruled out|did not|does not|was not|were not|cannot|can't|couldn't|didn't|wasn't)\b")
CANONICAL: dict[str, str] = LEXICON["canonical"]  # a brand name or abbreviation -> what a note may write instead


@dataclass(frozen=True)
class Quantity:
    raw: float               # the number as written
    value: float             # in its dimension's base unit
    dimension: str | None    # None: a bare number
    text: str

    def matches(self, other: Quantity, tolerance: float) -> bool:
        """Within `tolerance` (relative) after converting units of one dimension; with a bare number on either
        side, the numbers as written: equal, or this one the other rounded ("about 15" is the note's 15.3; an
        answer's 8.4 is not a note's 8)."""
        if self.dimension and other.dimension:
            # durations convert within a month's slack: "2 to 3 months" is "60 to 90 days", "25 months" is not "2 years"
            allowed = 0.025 if self.dimension == "time" else tolerance
            return self.dimension == other.dimension and _close(self.value, other.value, allowed)
        return _close(self.raw, other.raw, 0.0) or _rounded(self.raw, other.raw)


def _close(a: float, b: float, tolerance: float) -> bool:
    return a == b or abs(a - b) <= tolerance * max(abs(a), abs(b))


def _rounded(whole: float, exact: float) -> bool:
    """`whole` is `exact` rounded to a whole number (and within 5% of it, so 1 is not 1.4)."""
    return whole == int(whole) and whole != exact and round(exact) == whole and _close(whole, exact, 0.05)


def _number(text: str) -> float:
    return float(text.replace(",", "")) if re.fullmatch(r"\d{1,3}(,\d{3})+", text) else float(text.replace(",", "."))


_GESTATION = re.compile(r"\b(\d+)w(\d+)d\b")
_AGE_SEX = re.compile(r"\b(\d+)\s?(?:yo\s?)?[MF]\b")


@lru_cache(maxsize=50_000)
def quantities(text: str) -> tuple[Quantity, ...]:
    """Every number in `text` with the unit that follows it (a range "7-10 days" gives 7 days and 10 days).
    "36w2d" is 36 weeks 2 days and "45F" 45 years."""
    text = _AGE_SEX.sub(r"\1 years", _GESTATION.sub(r"\1 weeks \2 days", text))
    out: list[Quantity] = []
    for m in _QUANTITY.finditer(text):
        unit = (m.group(3) or "").lower()
        dimension, factor = _UNITS.get(unit, (None, 1.0))
        for raw in (m.group(1), m.group(2)):
            if raw:
                out.append(Quantity(_number(raw), _number(raw) * factor, dimension, m.group(0).strip()))
    return tuple(out)


_PLACEHOLDER = re.compile(r"\[\*\*[^\]]*\*\*\]")


def content_quantities(text: str) -> tuple:
    """The quantities of a sentence outside its de-identification placeholders (a shifted date is no claim)."""
    return quantities(_PLACEHOLDER.sub(" ", text))


def unsupported_quantities(claimed: tuple[Quantity, ...], pool: tuple[Quantity, ...],
                           tolerance: float = 0.05) -> list[str]:
    """The claimed quantities that no quantity of `pool` matches."""
    return [q.text for q in claimed if not any(q.matches(p, tolerance) for p in pool)]


def canonical(word: str) -> str:
    return CANONICAL.get(word, word)


@lru_cache(maxsize=50_000)
def named_drugs(text: str) -> frozenset[str]:
    """Drugs a text names, by generic name."""
    return frozenset(canonical(w.strip("-'")) for w in words(text) if drug_class(w) is not None)


@lru_cache(maxsize=50_000)
def named_terms(text: str) -> frozenset[str]:
    """Every word of `text`, abbreviations and brand names read as their full / generic names, plus its 6-letter
    stems: what a note "mentions" when an answer's drug or test is looked up in it."""
    out: set[str] = set()
    for w in words(text):
        w = canonical(w.strip("-'"))
        out.add(w)
        out.add(w[:6])
        for part in w.split("-"):  # "Creat-1.9" -> creat
            out.add(canonical(part))
    return frozenset(out)


@lru_cache(maxsize=50_000)
def polarity(text: str, scope: int = 3) -> tuple[frozenset[str], frozenset[str]]:
    """(concepts the text negates, concepts it asserts): a concept is negated when it is named within `scope` words
    after a negation cue ("no large vessel occlusion", "was not started on heparin"), asserted when named elsewhere."""
    lowered = text.lower()
    negated_concepts: set[str] = set()
    spans = []
    for m in _NEGATION.finditer(lowered):
        window = lowered[m.end():].split()[:scope]
        negated_concepts |= concepts(" ".join(window))
        spans.append((m.start(), m.end() + len(" ".join(window)) + 1))
    rest = "".join(ch for i, ch in enumerate(lowered) if not any(a <= i < b for a, b in spans))
    return frozenset(negated_concepts), frozenset(concepts(rest) - negated_concepts)


def contradictions(text: str, support: list[str]) -> set[str]:
    """Concepts `text` negates that the support only asserts, or asserts that the support only negates."""
    negated_here, asserted_here = polarity(text)
    if not negated_here and not asserted_here:
        return set()
    negated_there: set[str] = set()
    asserted_there: set[str] = set()
    for sentence in support:
        n, a = polarity(sentence)
        negated_there |= n
        asserted_there |= a
    return {c for c in negated_here if c in asserted_there and c not in negated_there} | {
        c for c in asserted_here if c in negated_there and c not in asserted_there}
