"""How well the grounding check flags fabricated answer sentences, and how often it flags correct ones.

    python benchmarks/grounding_eval.py [--cases X.xml --key X_key.json ...] [--grounding claims] [--seed 0]
                                        [--fabrications FILE] [--override KEY=VALUE ...] [--list-missed]
    python benchmarks/grounding_eval.py --compare [--fabrications FILE] [--compiled STATE] [--reader STATE]
                                        [--judge-lm embedded [--lm-override KEY=VALUE ...] [--judge-from 0.99 ...]]

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

`--compare` scores the rules (`claims`) at their configured settings, with milliseconds per answer sentence.
`--reader STATE` adds the reader verifier (`grounding=reader`, its weights from STATE; every sentence read, none from
the cache), alone and with the rules. With `--judge-lm OPTION` (a conf/lm option: embedded, openai_compatible with
`--lm-override lm.client.api_base=...`, ...) it also scores the LM judge (`program.grounding.judge=lm`; its demos from
`--compiled` when that state holds a compiled judge): alone, with the rules, and with `--reader` also with the rules
and the verifier and with the verifier as its first pass (`judge_from`), each row with the LM calls it needs. The
judge is asked once per sentence; the other rows are read from the same verdicts (what each part flagged).

The check runs exactly as in the program (program/archehr/grounding=<option>: a run with an LM's, unless --grounding
names another; `--override program.grounding.check_negation=true` sets any other key), over a small grid of its two
thresholds; the row of the option's configured values is marked (default). Each row gives flag precision, flag
recall and the false-flag rate on the reference sentences, then the recall of each kind; a table per kind follows for
the default row (its precision: as if only that kind had been injected into the same answers).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.errors import ClinprogError  # noqa: E402
from tasks.archehr.fabrications import (  # noqa: E402
    DATA,
    answers,
    kind_table,
    kinds_of,
    load,
    load_fabrications,
    score,
    table,
)


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
    parser.add_argument("--compare", action="store_true", help="the rules, and with --reader the reader verifier")
    parser.add_argument("--compiled", default=str(DATA / "compiled_program.json"),
                        help="program state holding a compiled LM judge's demos (default: the shipped one)")
    parser.add_argument("--reader", default=None, help="with --compare: also the reader verifier, its weights from "
                        "this program state (e.g. data/archehr/compiled_reader_qwen.json)")
    parser.add_argument("--judge-lm", default=None, help="with --compare: also the LM judge on this conf/lm option")
    parser.add_argument("--lm-override", action="append", default=[], metavar="KEY=VALUE",
                        help="an lm.* override for --judge-lm, e.g. lm.client.api_base=http://127.0.0.1:8080/v1")
    parser.add_argument("--judge-from", type=float, action="append", default=None,
                        help="a first-pass row's program.grounding.judge_from (the verifier's probability; "
                             "repeatable; default 0.99 and 0.999)")
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

    # the check of a run with an LM (the default run's extractive answer quotes the note and has none)
    base = ["program=archehr", "stages=lm", *([f"program/archehr/grounding={args.grounding}"] if args.grounding else []),
            *args.override]
    cfg = compose_config(*base)
    option = choice(cfg, "program/archehr/grounding")
    embedder = instantiate(cfg.program.embedder)
    items = answers(cases, key, rng, fabrications)
    kinds = kinds_of(items)
    if args.compare:
        print(f"{len(items)} cases, {sum(len(i.fabricated) for i in items)} fabricated sentences "
              f"({'from ' + args.fabrications if fabrications is not None else 'made here'})"
              + (f"; reader verifier weights from {os.path.relpath(args.reader)}" if args.reader else "") + "\n")
        print("\n".join(compare(embedder, items, kinds, args.compiled, args.override, args.reader)))
        if args.judge_lm:
            print(f"\nThe LM judge, lm={args.judge_lm}" + (f" ({' '.join(args.lm_override)})" if args.lm_override else "")
                  + ":\n")
            print("\n".join(judge_rows(embedder, items, kinds, args.compiled, args.override,
                                        [f"lm={args.judge_lm}", *args.lm_override], args.judge_from or [0.99, 0.999],
                                        args.reader)))
        return
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
            check = built_check(embedder, node)
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


def built_check(embedder, node, compiled: str | None = None):
    """The grounding check of config `node`, as the program builds it (the answer stage's 75 words and soft cut),
    with the `_grounding` weights `compiled` holds."""
    from hydra.utils import instantiate

    from common.program_state import load_module_state
    from common.resources import Resources

    check = Resources(embedder=embedder).complete(instantiate(node, _convert_="all"), "program.grounding",
                                                  max_words=75, soft_cut_ratio=0.6)
    if compiled:
        load_module_state(check, compiled, "_grounding")
    return check


def compare(embedder, items, kinds: Sequence[str], compiled: str, overrides: Sequence[str],
            reader: str | None = None) -> list[str]:
    """One row per check (the rules; the reader's two with `reader`) at its configured settings."""
    import time

    from common.config_groups import compose_config

    checks = [("rules (claims)", ["program/archehr/grounding=claims"], compiled)]
    if reader:
        uncached = ["program/archehr/grounding=reader", "program.grounding.verifier.reader.cache=false"]
        checks += [("reader verifier alone", [*uncached, "program.grounding.rules=false"], reader),
                   ("rules + reader verifier", uncached, reader)]
    lines = ["| check | flag precision | flag recall | false-flag rate (reference) | ms per sentence |"
             + "".join(f" recall: {k} |" for k in kinds), "|---|---|---|---|---|" + "---|" * len(kinds)]
    for name, choice, state in checks:
        node = compose_config("program=archehr", "stages=lm", *choice, *overrides).program.grounding
        check = built_check(embedder, node, state)
        score(check, items[:1])  # models loaded before timing; then every check starts from empty text caches
        embedder._cache.clear()
        started = time.perf_counter()
        s = score(check, items)
        ms = 1000 * (time.perf_counter() - started) / max(1, s.negatives + s.tp + s.fn)
        lines.append(f"| {name} | {s.precision:.3f} | {s.recall:.3f} | {s.false_flag_rate:.3f} | {ms:.0f} |"
                     + "".join(f" {s.recall_of(k):.3f} |" for k in kinds))
    return lines


def judge_rows(embedder, items, kinds: Sequence[str], compiled: str, overrides: Sequence[str],
               lm_overrides: Sequence[str], judge_from: Sequence[float], reader: str | None = None) -> list[str]:
    """The LM judge's rows: one pass of the rules (+ the reader verifier with `reader`) + judge (every sentence
    asked), then each configuration's decision read from which part flagged each sentence."""
    import time

    import dspy

    from common.config_groups import compose_config
    from common.program_state import load_module_state
    from lms import build_lm
    from runners.dspy_setup import configure_dspy

    cfg = compose_config("program=archehr", "stages=lm", f"program/archehr/grounding={'reader' if reader else 'claims'}",
                         "program.grounding.judge=lm", *overrides, *lm_overrides)
    configure_dspy(cfg)
    lm = build_lm(cfg.lm)
    check = built_check(embedder, cfg.program.grounding, reader)
    if compiled:  # the judge's demos (a state without them leaves it as configured)
        load_module_state(check, compiled, "_grounding")
    demos = len(check.judge.predict.demos)
    recorded = []
    with dspy.context(lm=lm):
        started = time.perf_counter()
        for item in items:
            recorded.append(check(item.sentences, item.alignment, list(item.case.sentences)).verdicts)
        seconds = time.perf_counter() - started
    sentences = sum(len(v) for v in recorded)

    def judge_flags(v: dict) -> bool:
        return (v.get("judge") or {}).get("verdict", "supported") != "supported"

    def rules_flag(v: dict) -> bool:
        return any(not r.startswith(("verifier:", "LM judge:")) for r in v.get("reasons") or [])

    def verifier_flags(v: dict) -> bool:
        return (v.get("verifier") or {}).get("verdict", "supported") != "supported"

    def asked_at(v: dict, t: float) -> bool:
        return rules_flag(v) or (v.get("verifier") or {}).get("probability", 1.0) >= t

    rows = [("LM judge alone", judge_flags, sentences),
            ("rules + LM judge", lambda v: rules_flag(v) or judge_flags(v), sentences)]
    if reader:
        rows.append(("rules + verifier + LM judge (judge_from=0)",
                     lambda v: rules_flag(v) or verifier_flags(v) or judge_flags(v), sentences))
    for t in judge_from if reader else ():
        rows.append((f"rules + verifier + LM judge (judge_from={t})",
                     lambda v, t=t: rules_flag(v) or verifier_flags(v) or (asked_at(v, t) and judge_flags(v)),
                     sum(asked_at(v, t) for vs in recorded for v in vs)))
    unavailable = sum("unavailable" in (v.get("judge") or {}) for vs in recorded for v in vs)
    lines = [f"{sentences} sentences judged in {seconds:.0f} s ({1000 * seconds / max(1, sentences):.0f} ms each, "
             f"the judge's {demos} demos); replies that did not parse (no flag): {unavailable}", "",
             "| check | flag precision | flag recall | false-flag rate (reference) | LM calls |"
             + "".join(f" recall: {k} |" for k in kinds), "|---|---|---|---|---|" + "---|" * len(kinds)]
    for name, flags, calls in rows:
        replay = iter(recorded)

        def decided(*_, flags=flags, replay=replay):
            return dspy.Prediction(verdicts=[{**v, "verdict": "contradicted" if flags(v) else "supported"}
                                             for v in next(replay)])

        s = score(decided, items)
        lines.append(f"| {name} | {s.precision:.3f} | {s.recall:.3f} | {s.false_flag_rate:.3f} | {calls} |"
                     + "".join(f" {s.recall_of(k):.3f} |" for k in kinds))
    return lines


def cli(argv: Sequence[str] | None = None) -> None:
    try:
        main(argv)
    except ClinprogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    cli()
