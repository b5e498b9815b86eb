"""The LM path measured (issue #51): each row one real `main.py` run on the same cases, read back from its own
scores.json and usage.json, printed as one markdown table.

    python benchmarks/lm_path.py archehr [--cases data/archehr/dev_cases.xml] [--limit 10] [--rows no_lm,smollm2,qwen]
    python benchmarks/lm_path.py mediqa [--limit 10] [--rows qwen_1ep,qwen_seed] [--no-search] [--notes notes.csv]

ArchEHR rows: ST1-ST4 overall scores (ST2 strict micro F1; ST4 micro F1), beside the select-every-sentence baseline
of the same cases; per stage parse success, useful rate (1 - degenerate replies) and fallbacks; seconds per case.
MEDIQA-CORR rows: error flag / sentence accuracy, AggregateC (ROUGE-1 and BERTScore where its model loads), the
fallback and degenerate counts, minutes per note, beside the majority-class baseline (every note "no error").
The LM rows run uncached (`lm.client.cache=false`): seconds are the model's. Run folders stay under --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.archehr.data import load_key  # noqa: E402
from tasks.archehr.scoring import score_subtask2  # noqa: E402

QWEN = ("lm=embedded_qwen", "lm.client.cache=false")
ARCHEHR_ROWS: dict[str, tuple[str, ...]] = {
    "no_lm": (),                                                    # the default: learned non-LLM stages
    "smollm2": ("lm=embedded", "lm.client.cache=false"),            # SmolLM2-135M, the seed's forms
    "qwen_seed": QWEN,                                              # the 1.5B Qwen, the seed's forms
    "qwen": (*QWEN, "experiment=small_lm_forms"),                   # the 1.5B Qwen, the small-LM forms
    # the same, each sentence rated against the clinician question and the patient's own message
    "qwen_anchor_both": (*QWEN, "experiment=small_lm_forms", "program.evidence.anchor=both"),
}
MEDIQA_ROWS: dict[str, tuple[str, ...]] = {
    "smollm2_1ep": ("lm=embedded", "lm.client.cache=false", "program.reflexion.max_episodes=1"),
    "qwen_1ep": (*QWEN, "program.reflexion.max_episodes=1"),
    # the same, the five reviews (and the agent's steps) reading their shared prompt frame once (note + proposal)
    "qwen_1ep_reuse": (*QWEN, "program.reflexion.max_episodes=1", "lm.client.prefix_reuse=true"),
    "qwen_seed": QWEN,                                              # the seed's bounds: 5 episodes x 4 steps
}
STAGES = ("question", "evidence", "answer", "alignment")


def run(folder: Path, args: tuple[str, ...], columns: int) -> tuple[dict, dict, float] | str:
    """One `main.py` run into `folder` (resumed when it is there): its scores.json, usage.json and wall seconds, or,
    when it failed, its table row's cells after the row name (`columns` empty ones, then the exit status and
    stderr's last line)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args, f"hydra.run.dir={folder}", "progress=false"],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0 or not (folder / "scores.json").is_file():
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        return " |" * columns + f" {proc.returncode}: {last} |"
    return (json.loads((folder / "scores.json").read_text()), json.loads((folder / "usage.json").read_text()),
            time.monotonic() - start)


def every_sentence_f1(folder: Path, key_path: Path) -> float:
    """ST2 strict micro F1 of selecting every note sentence, on the cases this run submitted."""
    submitted = json.loads((folder / "submission_subtask_2.json").read_text())
    key = load_key(key_path)
    ids = [entry["case_id"] for entry in submitted]
    return score_subtask2({cid: list(key[cid].relevance) for cid in ids}, {cid: key[cid] for cid in ids})["overall_score"]


def rate(values: dict, stage: str) -> str:
    value = (values or {}).get(stage)
    return "-" if value is None else f"{value:.2f}"


def archehr(args: argparse.Namespace) -> list[str]:
    data = (f"data.cases={args.cases}", f"data.key={args.key}", f"data.limit={args.limit}", "task=evaluate",
            "metrics.bertscore=null")
    out = [f"cases: {args.cases} (first {args.limit}); ST2 = strict micro F1, ST4 = micro F1; per stage "
           "q/e/a/l = question/evidence/answer/alignment", "",
           "| row | ST1 | ST2 | ST2 every sentence | ST3 | ST4 | parse success q/e/a/l | useful q/e/a/l | fallbacks "
           "| degenerate | s/case | exit |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in args.rows:
        folder = args.out / "archehr" / row
        result = run(folder, ("program=archehr", *ARCHEHR_ROWS[row], *data), columns=10)
        if isinstance(result, str):
            out.append(f"| {row} |{result}")
            continue
        scores, usage, seconds = result
        st = [scores.get(f"subtask_{i}", {}).get("overall_score") for i in (1, 2, 3, 4)]
        parse = "/".join(rate(usage.get("parse_success_rate"), s) for s in STAGES)
        useful = "/".join(rate(usage.get("useful_rate"), s) for s in STAGES)
        cells = [f"{v:.1f}" if isinstance(v, int | float) else "-" for v in st]
        out.append(f"| {row} | {cells[0]} | {cells[1]} | {every_sentence_f1(folder, args.key):.1f} | {cells[2]} "
                   f"| {cells[3]} | {parse} | {useful} | {usage.get('fallbacks') or {}} | {usage.get('degenerate') or {}} "
                   f"| {usage.get('seconds_per_case', seconds / args.limit):.0f} | 0 |")
    return out


def mediqa(args: argparse.Namespace) -> list[str]:
    data = (f"data.limit={args.limit}", "task=evaluate", *(("program.search.enabled=false",) if args.no_search else ()),
            *((f"data.path={args.notes}",) if args.notes else ()))
    source = args.notes.name if args.notes else "MEDEC-MS validation"
    tool = ", the agent's search tool off" if args.no_search else ", search over indexes/default"
    out = [f"{source}, first {args.limit} notes{tool}", "",
           "| row | flag acc | sentence acc | AggregateC | fallbacks | degenerate | min/note | LM calls/note "
           "| input tokens/note | exit |", "|---|---|---|---|---|---|---|---|---|---|"]
    baseline = None
    for row in args.rows:
        folder = args.out / "mediqa" / row
        result = run(folder, ("program=mediqa_corr", *MEDIQA_ROWS[row], *data), columns=8)
        if isinstance(result, str):
            out.append(f"| {row} |{result}")
            continue
        scores, usage, _ = result
        counters = scores.get("counters", {})
        baseline = baseline or counters.get("reference_na", 0) / max(1, counters.get("total_texts", 1))
        agg = scores.get("AggregateC")
        out.append(f"| {row} | {scores['error_flag_accuracy']:.2f} | {scores['error_sentence_accuracy']:.2f} "
                   f"| {'-' if agg is None else f'{agg:.2f}'} ({'+'.join(scores.get('AggregateC_components', []))}) "
                   f"| {usage.get('fallbacks')} | {usage.get('degenerate')} | {usage['seconds_per_note'] / 60:.1f} "
                   f"| {usage.get('lm_calls_per_note', 0):.1f} | {usage.get('input_tokens_per_note', 0):.0f} | 0 |")
    if baseline is not None:  # every note "no error": right on exactly the error-free notes, on every measure
        out.append(f"| majority class (every note no error) | {baseline:.2f} | {baseline:.2f} | {baseline:.2f} "
                   "| - | - | - | 0 | 0 | - |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("program", choices=("archehr", "mediqa"))
    parser.add_argument("--cases", type=Path, default=ROOT / "data" / "archehr" / "dev_cases.xml")
    parser.add_argument("--key", type=Path, default=None, help="default: <cases>_key.json")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--rows", default=None, help="comma-separated row names (default: all of the program's)")
    parser.add_argument("--notes", type=Path, default=None,
                        help="mediqa: a labelled notes CSV (MEDEC's columns; default: the validation set)")
    parser.add_argument("--no-search", action="store_true",
                        help="mediqa: program.search.enabled=false (no index needed; the search action answers "
                             "'not available')")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "lm_path")
    args = parser.parse_args()
    rows = ARCHEHR_ROWS if args.program == "archehr" else MEDIQA_ROWS
    args.rows = args.rows.split(",") if args.rows else list(rows)
    unknown = [r for r in args.rows if r not in rows]
    if unknown:
        sys.exit(f"error: unknown row(s) {unknown}; {args.program} rows: {', '.join(rows)}")
    args.key = args.key or args.cases.with_name(args.cases.stem + "_key.json")
    print("\n".join(archehr(args) if args.program == "archehr" else mediqa(args)))


if __name__ == "__main__":
    main()
