"""Per-subtask comparison on the same cases: embedded LM cascade vs non-LLM stages vs trivial baselines.

    python benchmarks/archehr_no_lm.py

Datasets: the bundled ArchEHR-format cases (all four subtasks, with their key) and the 20 public dev
patient/clinician question pairs (Subtask 1 only; the 3 pairs used as the LM's few-shot demos are left out, so all
variants are scored on the same 17). Scores are the official leaderboard values (0-100); overall scores average
the metrics available offline (AlignScore and MEDCON are not). Each variant is one `python main.py` run.
"""

from __future__ import annotations

import json
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from clinprog_cli import run_main  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parents[1]
DEMO_IDS = {"2", "5", "9"}  # conf/program/archehr/question/lm.yaml: program.question.demos.ids

VARIANTS = {
    "trivial baseline": ["lm=none", "program/archehr/question=baseline",
                         "program/archehr/evidence=embedding_likert", "program/archehr/alignment=similarity",
                         "program.evidence.cuts=[9,9,9,9]",
                         "program.alignment.threshold=2"],
    "embedded LM (SmolLM2-135M)": ["lm=embedded"],
    "non-LLM stages (lm=none, the default)": ["lm=none"],
}
TRIVIAL_NOTE = ("trivial: first '?' sentence (15 words); first 3 note sentences; those sentences as the answer; "
                "no alignment links")


def run(overrides: list[str], cases: Path, key: str | None, out: Path) -> dict:
    run_main("program=archehr", f"data.cases={cases}", f"data.key={key or 'null'}", *overrides, out=out)
    scores = json.loads((out / "scores.json").read_text())
    usage = json.loads((out / "usage.json").read_text())
    return {"scores": scores, "seconds_per_case": usage["seconds_per_case"]}


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="archehr_no_lm_"))
    tree = ET.parse(ROOT / "data" / "archehr" / "dev_questions_2025.xml")
    root = tree.getroot()
    for case in list(root):
        if case.get("id") in DEMO_IDS:
            root.remove(case)
    dev = tmp / "dev17.xml"
    tree.write(dev)
    bundled = ROOT / "data" / "archehr" / "bundled_cases.xml"
    key = ROOT / "data" / "archehr" / "bundled_cases_key.json"

    rows = []
    for name, overrides in VARIANTS.items():
        b = run(overrides, bundled, str(key), tmp / f"{len(rows)}_bundled")
        d = run(overrides, dev, None, tmp / f"{len(rows)}_dev")
        s = b["scores"]
        rows.append((name, d["scores"]["subtask_1"]["rougeL"], d["scores"]["subtask_1"]["overall_score"],
                     s["subtask_1"]["rougeL"], s["subtask_2"]["strict_micro_f1"], s["subtask_2"]["lenient_micro_f1"],
                     s["subtask_3"]["overall_score"], s["subtask_3"]["rougeLsum"], s["subtask_4"]["micro_f1"],
                     b["seconds_per_case"]))
    print("| variant | ST1 ROUGE-L, 17 dev pairs | ST1 overall*, dev | ST1 ROUGE-L, bundled | ST2 strict micro F1 "
          "| ST2 lenient micro F1 | ST3 overall* | ST3 ROUGE-Lsum | ST4 micro F1 | s/case (bundled) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | " + " | ".join(f"{v:.2f}" for v in r[1:]) + " |")
    print(f"\n* overall of the offline-available metrics (ST1: ROUGE-Lsum + BERTScore with the packaged MiniLM; ST3: "
          f"BLEU, ROUGE-Lsum, SARI, BERTScore-MiniLM); AlignScore and MEDCON unavailable.\n{TRIVIAL_NOTE}")


if __name__ == "__main__":
    main()
