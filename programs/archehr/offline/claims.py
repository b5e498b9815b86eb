"""What a sentence claims, read without an LM: quantities (numbers with their units), drugs, tests, negations.

Used by the grounding check (is each claim of an answer sentence in the note?) and by the alignment features (does
the answer sentence state what this note sentence states?). Quantities are compared after unit conversion and with a
small tolerance for rounding ("almost 1.5 liters" is the note's "1450 mL"); a bare number must match exactly.
Brand names and lab abbreviations are read as their generic / full names ("Eliquis" is apixaban, "Hgb" hemoglobin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from programs.archehr.offline.clinical_lexicon import drug_class, words

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
    "gy": ("radiation", 1.0), "fractions": ("count", 1.0), "doses": ("count", 1.0), "tablets": ("count", 1.0),
}
_UNIT_PATTERN = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
_QUANTITY = re.compile(rf"(?<![\d.])(\d+(?:[.,]\d+)?)(?:\s*(?:-|to)\s*(\d+(?:\.\d+)?))?\s*({_UNIT_PATTERN})?(?![a-z0-9])",
                       re.IGNORECASE)
_NEGATION = re.compile(r"\b(no|not|without|denies|denied|negative|never|none|neither|nor|unremarkable|absent|"
                       r"free of|ruled out|did not|does not|was not|were not|cannot|can't|couldn't|didn't|wasn't)\b")
# brand names and abbreviations -> the generic / full name the note may use instead
CANONICAL: dict[str, str] = {
    "eliquis": "apixaban", "xarelto": "rivaroxaban", "coumadin": "warfarin", "pradaxa": "dabigatran",
    "lovenox": "enoxaparin", "plavix": "clopidogrel", "brilinta": "ticagrelor", "lasix": "furosemide",
    "tylenol": "acetaminophen", "paracetamol": "acetaminophen", "zofran": "ondansetron", "keppra": "levetiracetam",
    "flagyl": "metronidazole", "dilaudid": "hydromorphone", "solumedrol": "methylprednisolone",
    "synthroid": "levothyroxine", "levophed": "norepinephrine", "benadryl": "diphenhydramine", "asa": "aspirin",
    "tpa": "alteplase", "narcan": "naloxone", "augmentin": "amoxicillin", "zosyn": "piperacillin",
    "bactrim": "trimethoprim", "tamiflu": "oseltamivir", "miralax": "polyethylene", "kayexalate": "polystyrene",
    "hgb": "hemoglobin", "hb": "hemoglobin", "hct": "hematocrit", "plt": "platelets", "platelet": "platelets",
    "creat": "creatinine", "cr": "creatinine", "trop": "troponin", "k": "potassium", "na": "sodium",
    "hba1c": "a1c", "hco3": "bicarbonate", "bicarb": "bicarbonate", "tbili": "bilirubin", "ddimer": "d-dimer",
    "egfr": "gfr", "ntprobnp": "bnp", "wbcs": "wbc",
}


@dataclass(frozen=True)
class Quantity:
    value: float
    dimension: str | None    # None: a bare number
    text: str

    def matches(self, other: Quantity, tolerance: float) -> bool:
        """Same value (bare numbers), or within `tolerance` (relative) after converting units of one dimension."""
        if self.dimension and other.dimension:
            if self.dimension != other.dimension:
                return False
            return _close(self.value, other.value, tolerance)
        return _close(self.value, other.value, 0.0) or (
            bool(self.dimension or other.dimension) and _close(self.value, other.value, tolerance))


def _close(a: float, b: float, tolerance: float) -> bool:
    return a == b or abs(a - b) <= tolerance * max(abs(a), abs(b))


def _number(text: str) -> float:
    return float(text.replace(",", "")) if re.fullmatch(r"\d{1,3}(,\d{3})+", text) else float(text.replace(",", "."))


@lru_cache(maxsize=50_000)
def quantities(text: str) -> tuple[Quantity, ...]:
    """Every number in `text` with the unit that follows it (a range "7-10 days" gives 7 days and 10 days)."""
    out: list[Quantity] = []
    for m in _QUANTITY.finditer(text):
        unit = (m.group(3) or "").lower()
        dimension, factor = _UNITS.get(unit, (None, 1.0))
        for raw in (m.group(1), m.group(2)):
            if raw:
                out.append(Quantity(_number(raw) * factor, dimension, m.group(0).strip()))
    return tuple(out)


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


def negated(text: str) -> bool:
    return bool(_NEGATION.search(text.lower()))
