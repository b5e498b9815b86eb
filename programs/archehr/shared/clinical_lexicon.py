"""Clinical vocabulary, hand-written in clinical_lexicon.yaml: drugs, tests, procedures and their lay words.
`concepts(text)` merges lay and clinical synonyms ("blood thinner" and "apixaban" both give `anticoagulant`)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml

LEXICON = yaml.safe_load(Path(__file__).with_name("clinical_lexicon.yaml").read_text(encoding="utf-8"))
DRUG_CLASS: dict[str, str] = {name: cls for cls, names in LEXICON["drug_classes"].items() for name in names.split()}
_DRUG_SUFFIXES: dict[str, str] = LEXICON["drug_suffixes"]  # tried in the file's order
_NOT_DRUGS = frozenset(LEXICON["not_drugs"].split())
_WORD_CONCEPT: dict[str, str] = {w.lower(): c for c, words in LEXICON["concept_words"].items() for w in words.split()}
_PHRASES: dict[str, str] = LEXICON["phrases"]  # multi-word, matched before single words
_CLASS_ALIASES: dict[str, str] = LEXICON["class_aliases"]
TESTS = frozenset(LEXICON["tests"].split())
_PROCEDURE_SUFFIXES = tuple(LEXICON["procedure_suffixes"].split())

_WORD = re.compile(r"[a-z][a-z0-9'-]*")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@lru_cache(maxsize=50_000)
def drug_class(word: str) -> str | None:
    """The class concept of a drug name ("apixaban" -> anticoagulant), "" for a listed drug of no class, None for a
    word that is not a drug."""
    word = word.lower().strip("-'")
    if word in DRUG_CLASS:
        return DRUG_CLASS[word]
    if len(word) < 7 or word in _NOT_DRUGS:
        return None
    for suffix, cls in _DRUG_SUFFIXES.items():
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return cls
    return None


@lru_cache(maxsize=50_000)
def concepts(text: str) -> frozenset[str]:
    """Canonical concepts a text mentions: drugs (by name and by class), tests, procedures, organs, findings, with
    lay phrases expanded ("blood thinner" -> anticoagulant, blood_thinner)."""
    lowered = " " + re.sub(r"[^a-z0-9]+", " ", text.lower()) + " "
    found: set[str] = set()
    for phrase, concept in _PHRASES.items():
        if f" {phrase} " in lowered:
            found.add(concept)
    tokens = [part for w in words(text) for part in {w.strip("-'"), *w.split("-")} if part and part[0].isalpha()]
    for word in tokens:  # "Creat-3.4*" is creat; "x-ray" both x-ray and ray
        if word in _WORD_CONCEPT:
            found.add(_WORD_CONCEPT[word])
        cls = drug_class(word)
        if cls is not None:
            found.add(f"drug:{word}")
            if cls:
                found.add(cls)
        if word in TESTS:
            found.add(f"test:{word}")
        if len(word) > 7 and word.endswith(_PROCEDURE_SUFFIXES):
            found.add(f"procedure:{word[:6]}")
    for cls, alias in _CLASS_ALIASES.items():
        if cls in found:
            found.add(alias)
        if alias in found:
            found.add(cls)
    return frozenset(found)
