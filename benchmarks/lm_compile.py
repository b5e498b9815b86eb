"""A few-shot compile of the LM cascade with a local model, on disjoint train and validation cases (#51 item 4).

    python benchmarks/lm_compile.py                                   # the 1.5B Qwen, small-LM forms, bootstrap
    python benchmarks/lm_compile.py --train 1011-1016 --val 1017-1020 --optimizer bootstrap --lm embedded_qwen

Writes the two splits of `--cases` (the hand-written dev cases by default) as their own XML + key files in the out
folder, runs `main.py task=compile` on them (`data.train` / `data.val`), and prints the compile report's before/after
and the demos each predictor got. The compiled state is saved inside the out folder, never over a shipped file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def id_range(text: str) -> list[str]:
    first, _, last = text.partition("-")
    return [str(i) for i in range(int(first), int(last or first) + 1)]


def write_split(cases: Path, key: Path, ids: list[str], out: Path) -> tuple[Path, Path]:
    tree = ET.parse(cases)
    root = tree.getroot()
    for case in list(root):
        if case.get("id") not in ids:
            root.remove(case)
    found = [case.get("id") for case in root]
    if sorted(found) != sorted(ids):
        sys.exit(f"error: {cases} lacks cases {sorted(set(ids) - set(found))}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tree.write(out, encoding="utf-8")
    entries = [e for e in json.loads(key.read_text()) if e["case_id"] in ids]
    key_out = out.with_name(out.stem + "_key.json")
    key_out.write_text(json.dumps(entries, indent=1))
    return out, key_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=ROOT / "data" / "archehr" / "dev_cases.xml")
    parser.add_argument("--key", type=Path, default=None, help="default: <cases>_key.json")
    parser.add_argument("--train", default="1011-1016", help="case ids, first-last")
    parser.add_argument("--val", default="1017-1020", help="case ids, first-last")
    parser.add_argument("--lm", default="embedded_qwen")
    parser.add_argument("--optimizer", default="bootstrap")
    parser.add_argument("--extra", nargs="*", default=["experiment=small_lm_forms"],
                        help="more overrides (default: the small-LM forms)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "lm_compile")
    args = parser.parse_args()
    key = args.key or args.cases.with_name(args.cases.stem + "_key.json")
    train, val = id_range(args.train), id_range(args.val)
    if set(train) & set(val):
        sys.exit(f"error: --train and --val share cases {sorted(set(train) & set(val))}")
    train_xml, train_key = write_split(args.cases, key, train, args.out / "splits" / "train.xml")
    val_xml, val_key = write_split(args.cases, key, val, args.out / "splits" / "val.xml")
    run = args.out / "run"
    command = [sys.executable, str(ROOT / "main.py"), "program=archehr", f"lm={args.lm}", *args.extra, "task=compile",
               f"optimizer={args.optimizer}", f"data.train={train_xml}", f"data.train_key={train_key}",
               f"data.val={val_xml}", f"data.val_key={val_key}", f"hydra.run.dir={run}", "progress=false",
               "metrics.bertscore=null", f"program.optimize.save_to={args.out / 'compiled.json'}"]
    start = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, text=True, capture_output=True)
    seconds = time.monotonic() - start
    print(proc.stdout[-3000:])
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
    report = run / "compile_report.json"
    if report.is_file():
        data = json.loads(report.read_text())
        print(f"train {args.train} ({data['train_size']}), val {args.val} ({data['val_size']}), {args.lm}, "
              f"{args.optimizer}: before {data['scores']['before']:.4f} after {data['scores']['after']:.4f} "
              f"saved {data['saved']}; {seconds / 60:.1f} min; exit {proc.returncode}")
    scores = run / "scores.json"
    if scores.is_file():
        print("demos per predictor:", json.loads(scores.read_text()).get("demos"))


if __name__ == "__main__":
    main()
