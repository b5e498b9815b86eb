"""Fabricated answer sentences and how a grounding check scores on them: the `grounding-fabrications/1` format, the
three kinds `fabricate` makes from a case, the answers they are injected into, and benchmarks/grounding_eval.py's
tables."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import json_input
from common.errors import ClinprogError
from tasks.archehr.data import Case, KeyCase, check_key, load_cases, load_key

DATA = Path(__file__).resolve().parents[2] / "data" / "archehr"
DRUGS = ["warfarin", "amiodarone", "levetiracetam", "methotrexate", "clozapine", "tacrolimus", "digoxin", "lithium"]
RESULTS = [("serum potassium", "6.9 mmol/L"), ("lactate", "8.4 mmol/L"), ("hemoglobin A1c", "11.2%"),
           ("ferritin", "1450 ng/mL"), ("INR", "4.7"), ("lipase", "2300 U/L")]
BUILTIN_KINDS = ("unmentioned drug", "unmentioned test result", "changed number")  # fabricate()'s, in its order
FORMAT = "grounding-fabrications/1"
FIELDS = {"text", "citations", "kind"}
OPTIONAL_FIELDS = {"note"}


class FabricationsError(ClinprogError):
    """A fabrications file that cannot be scored: the message names the file and the entry."""


@dataclass(frozen=True)
class Fabrication:
    text: str
    citations: tuple[str, ...]
    kind: str


def fabricate(case, rng: random.Random) -> list[str]:
    note = " ".join(s.text for s in case.sentences).lower()
    drug = next(d for d in rng.sample(DRUGS, len(DRUGS)) if d not in note)
    test, value = next(r for r in rng.sample(RESULTS, len(RESULTS)) if r[0].split()[-1].lower() not in note)
    out = [f"The patient was also started on {drug} before discharge.", f"A {test} of {value} was found."]
    with_number = [s.text for s in case.sentences if re.search(r"\d", s.text)]
    if with_number:
        sentence = rng.choice(with_number)
        out.append(re.sub(r"\d+(?:\.\d+)?", lambda m: str(round(float(m.group()) * 3 + 7)), sentence, count=1))
    return out


def load(paths: list[str], keys: list[str]) -> tuple[list, dict]:
    if len(paths) != len(keys):
        raise ClinprogError(f"give one --key per --cases ({len(paths)} cases files, {len(keys)} keys)")
    cases, key = [], {}
    for path, key_path in zip(paths, keys, strict=True):
        these, their_key = load_cases(path), load_key(key_path)
        check_key(their_key, these, key_path)
        cases += these
        key.update(their_key)
    missing = [c.case_id for c in cases if not key[c.case_id].answer_sentences]
    if missing:
        raise ClinprogError(f"cases {missing[:5]} have no reference answer sentences in their key")
    return cases, key


def _ids(case: Case) -> str:
    ids = case.sentence_ids
    return f"{ids[0]}-{ids[-1]}" if len(ids) > 3 else ", ".join(ids)


def parse_fabrications(data: Any, cases: Sequence[Case], where: str = "fabrications") -> dict[str, list[Fabrication]]:
    """The fabrications of a `grounding-fabrications/1` document by case id, checked against `cases`; a
    `FabricationsError` names the first problem."""
    def fail(message: str) -> None:
        raise FabricationsError(f"{where}: {message}")

    if not isinstance(data, dict):
        fail(f'expected a JSON object {{"format": "{FORMAT}", "cases": {{...}}}}, not {type(data).__name__}')
    if data.get("format") != FORMAT:
        fail(f'"format" must be "{FORMAT}", not {json.dumps(data.get("format"))}' if "format" in data
             else f'no "format": the file must say "format": "{FORMAT}"')
    extra = sorted(set(data) - {"format", "cases", "description"})
    if extra:
        fail(f'unknown top-level field {json.dumps(extra[0])} (allowed: "format", "cases", "description")')
    if "cases" not in data:
        fail('no "cases": give {"<case_id>": [fabrications]}')
    if not isinstance(data["cases"], dict) or not data["cases"]:
        fail('"cases" must be a non-empty object {"<case_id>": [fabrications]}')
    by_id = {c.case_id: c for c in cases}
    out: dict[str, list[Fabrication]] = {}
    for case_id, entries in data["cases"].items():
        case = by_id.get(case_id)
        if case is None:
            known = sorted(by_id)
            fail(f"case {json.dumps(case_id)} is not one of the {len(known)} loaded cases "
                 f"({', '.join(known[:4])}{', ...' if len(known) > 4 else ''}); load its cases file with --cases/--key")
        if not isinstance(entries, list) or not entries:
            fail(f'cases["{case_id}"] must be a non-empty list of fabrications')
        sentence_ids = set(case.sentence_ids)
        out[case_id] = []
        for n, entry in enumerate(entries):
            at = f'cases["{case_id}"][{n}]'
            if not isinstance(entry, dict):
                fail(f'{at} must be an object {{"text", "citations", "kind"}}, not {type(entry).__name__}')
            missing = sorted(FIELDS - set(entry))
            if missing:
                fail(f"{at} has no {json.dumps(missing[0])} (each fabrication needs text, citations and kind)")
            unknown = sorted(set(entry) - FIELDS - OPTIONAL_FIELDS)
            if unknown:
                fail(f'{at} has an unknown field {json.dumps(unknown[0])} (allowed: text, citations, kind, note)')
            text, citations, kind = entry["text"], entry["citations"], entry["kind"]
            if not isinstance(text, str) or not text.strip():
                fail(f'{at}: "text" must be a non-empty string')
            if not isinstance(kind, str) or not kind.strip():
                fail(f'{at}: "kind" must be a non-empty string')
            if not isinstance(citations, list) or not citations:
                fail(f'{at}: "citations" must be a non-empty list of sentence ids of case {case_id}')
            for cite in citations:
                if not isinstance(cite, str):
                    fail(f'{at}: citation {json.dumps(cite)} must be a string (a sentence id such as "{case.sentence_ids[0]}")')
                if cite not in sentence_ids:
                    fail(f"{at}: citation {json.dumps(cite)} is not a sentence id of case {case_id} "
                         f"(its ids: {_ids(case)})")
            out[case_id].append(Fabrication(text.strip(), tuple(citations), kind.strip()))
    return out


def load_fabrications(path: str | Path, cases: Sequence[Case], other_cases: bool = False) -> dict[str, list[Fabrication]]:
    """`parse_fabrications` of a JSON file; with `other_cases`, entries of cases not in `cases` are left out instead of
    refused (a verifier's fit reads its splits' cases from files that may hold more)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FabricationsError(f"{path}: cannot read the fabrications file ({getattr(exc, 'strerror', None) or exc})") \
            from None
    try:
        data = json_input.loads(text)
    except ValueError as exc:
        raise FabricationsError(f"{path}: not valid JSON ({exc})") from None
    if other_cases and isinstance(data, dict) and isinstance(data.get("cases"), dict):
        loaded = {c.case_id for c in cases}
        data = {**data, "cases": {k: v for k, v in data["cases"].items() if k in loaded}}
        if not data["cases"]:
            return {}
    return parse_fabrications(data, cases, where=str(path))


@dataclass
class Answer:
    """One case's reference answer with the fabrications inserted; `fabricated`: id -> kind."""
    case: Case
    sentences: list[dict]
    alignment: list[dict]
    fabricated: dict[str, str]


def answers(cases: Sequence[Case], key: dict[str, KeyCase], rng: random.Random,
            fabrications: dict[str, list[Fabrication]] | None = None) -> list[Answer]:
    """Every case's reference answer with fabrications inserted at random places: `fabricate`'s, citing a random
    essential sentence, or those of `fabrications` (only the cases it names)."""
    out = []
    for case in cases:
        if fabrications is not None and case.case_id not in fabrications:
            continue
        ref = key[case.case_id].answer_sentences
        sentences = [{"id": aid, "text": text} for aid, text, _ in ref]
        alignment = [{"answer_id": aid, "evidence_id": list(cites)} for aid, _, cites in ref]
        if fabrications is None:
            essential = sorted(key[case.case_id].essential) or [case.sentences[0].id]
            made = [(text, None, kind) for text, kind in zip(fabricate(case, rng), BUILTIN_KINDS, strict=False)]
        else:
            essential = []
            made = [(f.text, list(f.citations), f.kind) for f in fabrications[case.case_id]]
        fabricated = {}
        for n, (text, citations, kind) in enumerate(made, 1):
            fid = f"f{n}"
            sentences.insert(rng.randrange(len(sentences) + 1), {"id": fid, "text": text})
            alignment.append({"answer_id": fid, "evidence_id": citations or [rng.choice(essential)]})
            fabricated[fid] = kind
        out.append(Answer(case, sentences, alignment, fabricated))
    return out


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    negatives: int = 0
    kinds: Counter = field(default_factory=Counter)      # fabrications per kind
    flagged: Counter = field(default_factory=Counter)    # flagged fabrications per kind
    false_flag_reasons: Counter = field(default_factory=Counter)
    missed: list[tuple[str, str, str]] = field(default_factory=list)  # (case id, kind, text) not flagged

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def false_flag_rate(self) -> float:
        return self.fp / self.negatives if self.negatives else 0.0

    def recall_of(self, kind: str) -> float:
        return self.flagged[kind] / self.kinds[kind] if self.kinds[kind] else 0.0

    def precision_of(self, kind: str) -> float:
        """Flag precision had only this kind been injected into the same answers (every false flag counts)."""
        return self.flagged[kind] / (self.flagged[kind] + self.fp) if self.flagged[kind] + self.fp else 0.0


def score(check: Callable[..., Any], items: Sequence[Answer]) -> Score:
    """The flags of `check(answer sentences, alignment, note sentences)` on every answer: any verdict in its
    `.verdicts` but "supported" is a flag."""
    s = Score()
    for item in items:
        texts = {x["id"]: x["text"] for x in item.sentences}
        for v in check(item.sentences, item.alignment, list(item.case.sentences)).verdicts:
            flagged, kind = v["verdict"] != "supported", item.fabricated.get(v["answer_id"])
            if kind is None:
                s.negatives += 1
                if flagged:
                    s.fp += 1
                    s.false_flag_reasons.update(r.split(":")[0].split(" (")[0] for r in v.get("reasons") or [])
                continue
            s.kinds[kind] += 1
            if flagged:
                s.tp += 1
                s.flagged[kind] += 1
            else:
                s.fn += 1
                s.missed.append((item.case.case_id, kind, texts.get(v["answer_id"], "")))
    return s


def kinds_of(items: Sequence[Answer]) -> list[str]:
    seen = Counter(k for item in items for k in item.fabricated.values())
    order = [k for k in BUILTIN_KINDS if k in seen]
    return order + sorted(k for k in seen if k not in order)


def table(rows: Sequence[tuple[float, float, Score, bool]], kinds: Sequence[str]) -> list[str]:
    """The grid: one row per (min_similarity, min_coverage, score, is the option's default)."""
    lines = ["| min_similarity | min_coverage | flag precision | flag recall | false-flag rate (reference) |"
             + "".join(f" recall: {k} |" for k in kinds),
             "|---|---|---|---|---|" + "---|" * len(kinds)]
    for sim, cov, s, default in rows:
        mark = " (default)" if default else ""
        lines.append(f"| {sim}{mark} | {cov} | {s.precision:.3f} | {s.recall:.3f} | {s.false_flag_rate:.3f} |"
                     + "".join(f" {s.recall_of(k):.3f} |" for k in kinds))
    return lines


def kind_table(s: Score, kinds: Sequence[str]) -> list[str]:
    return ["| kind | fabricated | flagged | recall | flag precision |", "|---|---|---|---|---|",
            *(f"| {k} | {s.kinds[k]} | {s.flagged[k]} | {s.recall_of(k):.3f} | {s.precision_of(k):.3f} |" for k in kinds),
            f"| all | {s.tp + s.fn} | {s.tp} | {s.recall:.3f} | {s.precision:.3f} |"]
