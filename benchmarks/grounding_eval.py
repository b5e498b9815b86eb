"""How well the grounding check flags fabricated answer sentences, and how often it flags correct ones.

    python benchmarks/grounding_eval.py [--cases X.xml --key X_key.json ...] [--grounding claims] [--seed 0]
                                        [--fabrications FILE] [--override KEY=VALUE ...] [--list-missed]

Cases: any ArchEHR XML files with their keys (`--cases`/`--key`, repeatable, in pairs; default
data/archehr/dev_cases.xml (34) + bundled_cases.xml (3)). Negatives: every reference answer sentence with its
reference citations (written by a clinician-style author from the note: they should pass). Positives: fabricated
sentences injected into the otherwise correct answer of a case, at a random place.

- Without `--fabrications`, the script makes its own, three per case, each citing one of the case's essential
  sentences (a fabricated claim with a plausible citation): a drug the note never mentions (kind `unmentioned drug`),
  a test result the note never mentions (`unmentioned test result`), and a number changed in a sentence copied from
  the note (`changed number`).
- `--fabrications FILE` scores a set written by anyone else instead (JSON, checked before anything runs; a problem
  is one `error:` line, exit code 2):

      {"format": "grounding-fabrications/1",
       "description": "optional",
       "cases": {"<case_id>": [{"text": "...", "citations": ["<sentence id>", ...], "kind": "...",
                                "note": "optional: what was changed"}, ...]}}

  Every case id must be one of the loaded cases, every citation one of that case's note sentence ids. Only the cases
  the file names are scored (their reference sentences are the negatives); benchmarks/fabrications_subtle.json is
  one such set.

The check runs exactly as in the program (program/archehr/grounding=<option>: a run with an LM's, unless --grounding
names another; `--override program.grounding.check_negation=true` sets any other key), over a small grid of its two
thresholds; the row of the option's configured values is marked (default). Each row gives flag precision, flag
recall and the false-flag rate on the reference sentences, then the recall of each kind; a table per kind follows for
the default row (its precision: as if only that kind had been injected into the same answers).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import json_input  # noqa: E402
from common.errors import ClinprogError  # noqa: E402
from tasks.archehr.data import Case, KeyCase, check_key, load_cases, load_key  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "archehr"
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
    """The fabrications of a `grounding-fabrications/1` document, by case id, checked against `cases`: a
    `FabricationsError` names the first problem (format tag, an unknown case id, a citation that is not a sentence id
    of its case, a missing, unknown or mistyped field)."""
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


def load_fabrications(path: str | Path, cases: Sequence[Case]) -> dict[str, list[Fabrication]]:
    """`parse_fabrications` of a JSON file; an unreadable or malformed file is a `FabricationsError` too."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FabricationsError(f"{path}: cannot read the fabrications file ({getattr(exc, 'strerror', None) or exc})") \
            from None
    try:
        data = json_input.loads(text)
    except ValueError as exc:
        raise FabricationsError(f"{path}: not valid JSON ({exc})") from None
    return parse_fabrications(data, cases, where=str(path))


@dataclass
class Answer:
    """One case's answer as checked: its reference sentences with the fabrications inserted, and which ids are
    fabricated (id -> kind)."""
    case: Case
    sentences: list[dict]
    alignment: list[dict]
    fabricated: dict[str, str]


def answers(cases: Sequence[Case], key: dict[str, KeyCase], rng: random.Random,
            fabrications: dict[str, list[Fabrication]] | None = None) -> list[Answer]:
    """Every case's reference answer with fabrications inserted at random places: the script's own (`fabricate`,
    citing a random essential sentence) or, given `fabrications`, those (only the cases it names)."""
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
    """Run `check(answer sentences, alignment, note sentences)` (a grounding check: `.verdicts`, each with
    `answer_id`, `verdict` and `reasons`) on every answer and count its flags."""
    s = Score()
    for item in items:
        texts = {x["id"]: x["text"] for x in item.sentences}
        for v in check(item.sentences, item.alignment, list(item.case.sentences)).verdicts:
            flagged, kind = v["verdict"] == "unsupported", item.fabricated.get(v["answer_id"])
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
    lines = ["| kind | fabricated | flagged | recall | flag precision |", "|---|---|---|---|---|"]
    for k in kinds:
        lines.append(f"| {k} | {s.kinds[k]} | {s.flagged[k]} | {s.recall_of(k):.3f} | {s.precision_of(k):.3f} |")
    lines.append(f"| all | {s.tp + s.fn} | {s.tp} | {s.recall:.3f} | {s.precision:.3f} |")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", action="append", help="ArchEHR XML (repeatable; default: the dev + bundled cases)")
    parser.add_argument("--key", action="append", help="its key JSON (one per --cases, in the same order)")
    parser.add_argument("--grounding", default=None, help="program/archehr/grounding option (default: an LM run's)")
    parser.add_argument("--fabrications", default=None, help="a grounding-fabrications/1 JSON file to score instead "
                        "of the script's own fabrications")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="another config override for the check, e.g. program.grounding.check_negation=true")
    parser.add_argument("--list-missed", action="store_true", help="list the fabrications the default row misses")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    if args.cases or args.key:
        cases, key = load(args.cases or [], args.key or [])
    else:
        cases, key = load([str(DATA / "dev_cases.xml"), str(DATA / "bundled_cases.xml")],
                          [str(DATA / "dev_cases_key.json"), str(DATA / "bundled_cases_key.json")])
    fabrications = load_fabrications(args.fabrications, cases) if args.fabrications else None  # before any model

    from hydra.utils import instantiate

    from common.config_groups import choice, compose_config
    from common.resources import Resources

    # the check of a run with an LM (the default run's extractive answer quotes the note and has none)
    base = ["program=archehr", "stages=lm", *([f"program/archehr/grounding={args.grounding}"] if args.grounding else []),
            *args.override]
    cfg = compose_config(*base)
    option = choice(cfg, "program/archehr/grounding")
    embedder = instantiate(cfg.program.embedder)
    items = answers(cases, key, rng, fabrications)
    kinds = kinds_of(items)
    source = f"fabrications from {args.fabrications}" if fabrications is not None else "fabrications made here"
    print(f"{len(items)} cases: {sum(len(i.sentences) - len(i.fabricated) for i in items)} reference answer sentences, "
          f"{sum(len(i.fabricated) for i in items)} fabricated ones ({source}); program/archehr/grounding={option}"
          + (f" ({' '.join(args.override)})" if args.override else "") + "\n")
    default = (cfg.program.grounding.min_similarity, cfg.program.grounding.min_coverage)
    grid = sorted({0.1, 0.2, 0.3, 0.4, default[0]}), sorted({0.0, 0.3, 0.5, default[1]})
    rows = []
    for sim in grid[0]:
        for cov in grid[1]:
            node = compose_config(*base, f"program.grounding.min_similarity={sim}",
                                  f"program.grounding.min_coverage={cov}").program.grounding
            check = Resources(embedder=embedder).complete(instantiate(node, _convert_="all"), "program.grounding",
                                                          max_words=75, soft_cut_ratio=0.6)
            rows.append((sim, cov, score(check, items), (sim, cov) == default))
    print("\n".join(table(rows, kinds)))
    at_default = next(s for *_, s, is_default in rows if is_default)
    print(f"\nper kind at the default ({default[0]}, {default[1]}):\n")
    print("\n".join(kind_table(at_default, kinds)))
    if at_default.false_flag_reasons:
        print("\nreasons of the default's false flags: "
              + "; ".join(f"{r} ({n})" for r, n in at_default.false_flag_reasons.most_common()))
    if args.list_missed and at_default.missed:
        print("\nmissed at the default:")
        for case_id, kind, text in at_default.missed:
            print(f"- {case_id} [{kind}] {text}")


def cli(argv: Sequence[str] | None = None) -> None:
    try:
        main(argv)
    except ClinprogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    cli()
