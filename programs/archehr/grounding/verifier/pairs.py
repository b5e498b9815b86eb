"""Training pairs for the verifier: (note sentences, answer sentence, label) made from cases with reference answers.

Positives are the reference answer sentences against the note sentences they cite: plain-language paraphrases, as
real answers are. Negatives are the same answer sentences with one fact changed (`perturb.py`), against the same
note sentences, so that only the changed fact separates the classes (perturbing note sentences instead teaches
"reworded = supported", which fails on real fabrications); and, as "not in the note", another case's answer sentence
or a clause from one joined on. Some premises get an uncited note sentence added, as the program's citations do.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from programs.archehr.grounding.verdicts import NOT_IN_NOTE, SUPPORTED
from programs.archehr.grounding.verifier.perturb import CONFLICT_KINDS, LABELS, perturb
from programs.archehr.shared.note_layout import is_header
from tasks.archehr.data import Case, KeyCase

MAX_PREMISE_SENTENCES = 3


@dataclass(frozen=True)
class Pair:
    premise: tuple[str, ...]   # the note sentences the answer sentence rests on
    hypothesis: str            # the answer sentence
    label: int                 # index into LABELS
    case_id: str


def cited_answers(case: Case, key_case: KeyCase) -> list[tuple[str, list[str]]]:
    """(reference answer sentence, the texts of the note sentences it cites, at most MAX_PREMISE_SENTENCES) of every
    reference sentence of `case` that cites one."""
    by_id = {s.id: s.text for s in case.sentences}
    out = []
    for _, text, cites in key_case.answer_sentences:
        cited = [by_id[i] for i in cites if i in by_id][:MAX_PREMISE_SENTENCES]
        if cited:
            out.append((text, cited))
    return out


def training_pairs(cases: Sequence[Case], key: dict[str, KeyCase], seed: int = 0, rounds: int = 2,
                   distractor_rate: float = 0.3) -> list[Pair]:
    """Every reference answer sentence of `cases` as a positive, and per round one perturbed copy per kind that
    applies (plus one 'not in the note'): the perturbations differ between rounds, the positives repeat."""
    rng = random.Random(seed)
    answers = {c.case_id: key[c.case_id].answer_sentences for c in cases if c.case_id in key}
    pairs: list[Pair] = []
    for case in cases:
        if not answers.get(case.case_id):
            continue
        plain = [s.text for s in case.sentences if not is_header(s.text)]
        foreign = [t for cid, ref in answers.items() if cid != case.case_id for _, t, _ in ref]
        for text, cited in cited_answers(case, key[case.case_id]):
            for _ in range(rounds):
                premise = list(cited)
                extra = [t for t in plain if t not in premise]
                if extra and rng.random() < distractor_rate and len(premise) < MAX_PREMISE_SENTENCES:
                    premise.insert(rng.randrange(len(premise) + 1), rng.choice(extra))
                pairs.append(Pair(tuple(premise), text, LABELS.index(SUPPORTED), case.case_id))
                for kind in CONFLICT_KINDS:
                    changed = perturb(text, kind, rng, foreign)
                    if changed:
                        pairs.append(Pair(tuple(premise), changed, LABELS.index(kind), case.case_id))
                # not in the note: another case's sentence, or a clause of one joined on (one of the two per round)
                unrelated = (rng.choice(foreign) if foreign and rng.random() < 0.5
                             else perturb(text, NOT_IN_NOTE, rng, foreign))
                if unrelated:
                    pairs.append(Pair(tuple(premise), unrelated, LABELS.index(NOT_IN_NOTE), case.case_id))
    return pairs


def note_pairs(cases: Sequence[Case], seed: int = 0, per_case: int = 20, min_words: int = 6) -> list[Pair]:
    """Pairs made from note sentences themselves: a sentence against itself (supported) and a copy of it with one
    fact changed (a conflict). Real fabrications copy the note's wording and change one fact; these teach that
    change, while the reference answers' paraphrases (`training_pairs`) teach that rewording is not one."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for case in cases:
        plain = [s.text for s in case.sentences if not is_header(s.text) and len(s.text.split()) >= min_words]
        for text in rng.sample(plain, min(per_case, len(plain))):
            premise = [text]
            others = [t for t in plain if t != text]
            if others and rng.random() < 0.5:
                premise.insert(rng.randrange(2), rng.choice(others))
            kinds = list(CONFLICT_KINDS)
            rng.shuffle(kinds)
            changed = next(((k, c) for k in kinds if (c := perturb(text, k, rng, others)) is not None), None)
            if changed is None:
                continue
            pairs.append(Pair(tuple(premise), text, LABELS.index(SUPPORTED), case.case_id))
            pairs.append(Pair(tuple(premise), changed[1], LABELS.index(changed[0]), case.case_id))
    return pairs
