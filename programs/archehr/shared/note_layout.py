"""The layout of a discharge-summary note: each sentence's section and kind of line (rules, not fitted).

MIMIC-style notes are not prose: headers stand alone, lab lines are `Name-value` tokens, medication lists are
numbered, de-identification placeholders (`___`, `[** ... **]`) fill the administrative lines."""

from __future__ import annotations

import re
from dataclasses import dataclass

SECTIONS = ("admin", "presentation", "history", "exam", "results", "course", "medications", "diagnosis",
            "instructions", "other")
KINDS = ("header", "admin", "lab", "vital", "medication", "exam", "problem", "instruction", "narrative")

# header words -> section (first match wins; checked on the header's text before its colon)
_SECTION_WORDS: tuple[tuple[str, str], ...] = (
    ("discharge medication", "medications"), ("discharge med", "medications"), ("medications on discharge", "medications"),
    ("discharge diagnos", "diagnosis"), ("discharge condition", "diagnosis"), ("discharge disposition", "diagnosis"),
    ("diagnos", "diagnosis"),
    ("discharge instruction", "instructions"), ("instruction", "instructions"), ("follow", "instructions"),
    ("admission date", "admin"), ("discharge date", "admin"), ("date of birth", "admin"), ("service", "admin"),
    ("allerg", "admin"), ("attending", "admin"), ("name", "admin"),
    ("chief complaint", "presentation"), ("present illness", "presentation"), ("hpi", "presentation"),
    ("major surgical", "presentation"), ("reason for", "presentation"),
    ("past medical", "history"), ("past surgical", "history"), ("social", "history"), ("family", "history"),
    ("medications on admission", "history"), ("home medication", "history"), ("admission medication", "history"),
    ("pmh", "history"),
    ("physical exam", "exam"), ("exam", "exam"), ("vital", "exam"),
    ("pertinent result", "results"), ("result", "results"), ("lab", "results"), ("imaging", "results"),
    ("studies", "results"), ("micro", "results"), ("patholog", "results"), ("radiolog", "results"),
    ("hospital course", "course"), ("course", "course"), ("assessment", "course"), ("plan", "course"),
    ("impression", "course"), ("summary", "course"), ("procedure", "course"), ("operati", "course"),
)
_PLACEHOLDER = re.compile(r"\[\*\*[^\]]*\*\*\]|_{3,}")
_LAB_TOKEN = re.compile(r"\b[A-Za-z%][A-Za-z0-9%]*-\d+(?:\.\d+)?\*?")   # Hgb-13.9  Creat-1.0*
_VITAL = re.compile(r"\b(BP|HR|RR|SpO2|O2 ?sat|T|P|Temp|Wt|Weight)\b:?\s*\d", re.IGNORECASE)
_MED_LINE = re.compile(r"^\s*\d{1,2}[.)]\s+\S")
_DOSE = re.compile(r"\d+(?:\.\d+)?\s*(mg|mcg|g|units?|ml|meq)\b.*\b(PO|IV|SC|SQ|IM|PR|daily|BID|TID|QID|QHS|q\d+h|"
                   r"once|twice|every)\b", re.IGNORECASE)
_EXAM = re.compile(r"^\s*(Gen|General|HEENT|Neck|CV|Cardiac|Lungs?|Pulm|Resp|Abd|Abdomen|Ext|Extremities|Neuro|"
                   r"Skin|Psych|GU|MSK)\s*:", re.IGNORECASE)
_INSTRUCTION = re.compile(r"\b(you|your|please|call|return to|come back|avoid)\b", re.IGNORECASE)
_ADMIN = re.compile(r"^\s*(Admission Date|Discharge Date|Date of Birth|Service|Allergies|Attending|Name|Unit No|"
                    r"Sex)\s*:", re.IGNORECASE)


def is_header(text: str) -> bool:
    """A section header standing as its own sentence: short and ending in ':'."""
    return text.rstrip().endswith(":") and len(text.split()) <= 6


def _section_of_header(text: str) -> str | None:
    head = text.split(":", 1)[0].lower()
    if len(head.split()) > 6:
        return None
    for word, section in _SECTION_WORDS:
        if word in head:
            return section
    return None


def placeholder_share(text: str) -> float:
    """The share of the sentence's characters that are de-identification placeholders."""
    stripped = text.strip()
    if not stripped:
        return 0.0
    return sum(len(m.group()) for m in _PLACEHOLDER.finditer(stripped)) / len(stripped)


def kind(text: str) -> str:
    if is_header(text):
        return "header"
    if _ADMIN.search(text) or placeholder_share(text) > 0.5:
        return "admin"
    if len(_LAB_TOKEN.findall(text)) >= 2 or re.search(r"\bBLOOD\b|\bURINE\b", text):
        return "lab"
    if len(_VITAL.findall(text)) >= 2:
        return "vital"
    if _MED_LINE.match(text) or _DOSE.search(text) and len(text.split()) <= 12:
        return "medication"
    if _EXAM.match(text):
        return "exam"
    if text.lstrip().startswith("#"):
        return "problem"
    if _INSTRUCTION.search(text):
        return "instruction"
    return "narrative"


@dataclass(frozen=True)
class Layout:
    sections: list[str]   # per sentence
    kinds: list[str]      # per sentence


def layout(texts: list[str]) -> Layout:
    """Each sentence's section (from the nearest header above it, or a header that starts it) and kind."""
    section = "other"
    sections, kinds = [], []
    for text in texts:
        found = _section_of_header(text) if (":" in text) else None
        if found:
            section = found
        sections.append(section)
        kinds.append(kind(text))
    return Layout(sections, kinds)
