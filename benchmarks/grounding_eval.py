"""How well the grounding check flags fabricated answer sentences, and how often it flags correct ones.

    python benchmarks/grounding_eval.py [--cases X.xml --key X_key.json ...] [--grounding claims] [--seed 0]

Cases: any ArchEHR XML files with their keys (`--cases`/`--key`, repeatable, in pairs; default
data/archehr/dev_cases.xml (34) + bundled_cases.xml (3)). Negatives: every reference answer sentence with its
reference citations (written by a clinician-style author from the note: they should pass). Positives: per case,
three fabricated sentences injected into the otherwise correct answer, each citing one of the case's essential
sentences (a fabricated claim with a plausible citation): a drug the note never mentions, a test result the note
never mentions, and a number changed in a sentence copied from the note. The check runs exactly as in the program
(program/archehr/grounding=<option>: a run with an LM's, unless --grounding names another), over a small grid of its
two thresholds; the row of the option's configured values is marked (default).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collections import Counter  # noqa: E402

from hydra.utils import instantiate  # noqa: E402

from common.config_groups import (
    compose_config,  # noqa: E402
    option_of,  # noqa: E402
)
from common.errors import ClinprogError  # noqa: E402
from common.resources import Resources  # noqa: E402
from tasks.archehr.data import check_key, load_cases, load_key  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "archehr"
DRUGS = ["warfarin", "amiodarone", "levetiracetam", "methotrexate", "clozapine", "tacrolimus", "digoxin", "lithium"]
RESULTS = [("serum potassium", "6.9 mmol/L"), ("lactate", "8.4 mmol/L"), ("hemoglobin A1c", "11.2%"),
           ("ferritin", "1450 ng/mL"), ("INR", "4.7"), ("lipase", "2300 U/L")]


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", action="append", help="ArchEHR XML (repeatable; default: the dev + bundled cases)")
    parser.add_argument("--key", action="append", help="its key JSON (one per --cases, in the same order)")
    parser.add_argument("--grounding", default=None, help="program/archehr/grounding option (default: an LM run's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if args.cases or args.key:
        cases, key = load(args.cases or [], args.key or [])
    else:
        cases, key = load([str(DATA / "dev_cases.xml"), str(DATA / "bundled_cases.xml")],
                          [str(DATA / "dev_cases_key.json"), str(DATA / "bundled_cases_key.json")])
    # the check of a run with an LM (the default run's extractive answer quotes the note and has none)
    base = ["program=archehr", "stages=lm"] + ([f"program/archehr/grounding={args.grounding}"] if args.grounding else [])
    cfg = compose_config(*base)
    option = option_of("program/archehr/grounding", cfg.program.grounding)
    embedder = instantiate(cfg.program.embedder)
    items = []  # (case, answer sentences, alignment, which are fabricated)
    for case in cases:
        ref = key[case.case_id].answer_sentences
        essential = sorted(key[case.case_id].essential) or [case.sentences[0].id]
        sentences = [{"id": aid, "text": text} for aid, text, _ in ref]
        alignment = [{"answer_id": aid, "evidence_id": cites} for aid, _, cites in ref]
        fabricated = set()
        for n, text in enumerate(fabricate(case, rng), 1):
            fid = f"f{n}"
            sentences.insert(rng.randrange(len(sentences) + 1), {"id": fid, "text": text})
            alignment.append({"answer_id": fid, "evidence_id": [rng.choice(essential)]})
            fabricated.add(fid)
        items.append((case, sentences, alignment, fabricated))

    print(f"{len(cases)} cases: {sum(len(i[1]) - len(i[3]) for i in items)} reference answer sentences, "
          f"{sum(len(i[3]) for i in items)} fabricated ones; program/archehr/grounding={option}\n")
    print("| min_similarity | min_coverage | flag precision | flag recall | false-flag rate (reference) |")
    print("|---|---|---|---|---|")
    default = (cfg.program.grounding.min_similarity, cfg.program.grounding.min_coverage)
    grid = sorted({0.1, 0.2, 0.3, 0.4, default[0]}), sorted({0.0, 0.3, 0.5, default[1]})
    false_flags: Counter = Counter()
    for sim in grid[0]:
        for cov in grid[1]:
            node = compose_config(*base, f"program.grounding.min_similarity={sim}",
                                  f"program.grounding.min_coverage={cov}").program.grounding
            check = Resources(embedder=embedder).complete(instantiate(node, _convert_="all"), "program.grounding",
                                                          max_words=75, soft_cut_ratio=0.6)
            tp = fp = fn = negatives = 0
            for case, sentences, alignment, fabricated in items:
                for v in check(sentences, alignment, list(case.sentences)).verdicts:
                    flagged, fake = v["verdict"] == "unsupported", v["answer_id"] in fabricated
                    tp += flagged and fake
                    fp += flagged and not fake
                    fn += (not flagged) and fake
                    negatives += not fake
                    if flagged and not fake and (sim, cov) == default:
                        false_flags.update(r.split(":")[0].split(" (")[0] for r in v["reasons"])
            precision = tp / (tp + fp) if tp + fp else 0.0
            recall = tp / (tp + fn) if tp + fn else 0.0
            mark = " (default)" if (sim, cov) == default else ""
            print(f"| {sim}{mark} | {cov} | {precision:.3f} | {recall:.3f} | {fp / negatives:.3f} |")
    if false_flags:
        print("\nreasons of the default's false flags: " + "; ".join(f"{r} ({n})" for r, n in false_flags.most_common()))


if __name__ == "__main__":
    try:
        main()
    except ClinprogError as exc:
        raise SystemExit(f"error: {exc}") from None
