"""Can a reader's probe rerank the question stage's candidates (issue #70 item 3)?

`python benchmarks/question_reader_rerank.py [--model smollm2|qwen2.5-coder-1.5b]`: the fine-tuned question stage
(the shipped state) makes its candidates for the messages of the dev cases and the 2025 dev pairs (its training
messages: the probe's training data) and of the 32 realistic cases (validation, never trained on). The reader reads
each (message, candidate) in one prompt (`read_claims`, the message as the "note"); a ridge regression on its last
hidden state predicts the candidate's ROUGE-L against the reference question. Reported on validation: ROUGE-L of
today's pick, of the oracle among the candidates, of the probe alone, and of today's score + w x the probe's
(both standardised on training), for a few ridge strengths and weights. Output: results_question_reader_rerank.txt.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from rouge_score import rouge_scorer
from sklearn.linear_model import Ridge

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.config_groups import compose_config  # noqa: E402
from common.logistic_fit import standardisation  # noqa: E402
from common.program_state import load_module_state  # noqa: E402
from common.resources import Resources  # noqa: E402
from lms.reader import GGUFReader  # noqa: E402
from tasks.archehr.data import load_cases  # noqa: E402

DATA = ROOT / "data" / "archehr"
SPLITS = {"train": ["dev_cases", "dev_questions_2025"], "val": ["realistic_cases_a", "realistic_cases_b"]}


def question_stage():
    cfg = compose_config("program=archehr")
    stage = Resources(embedder=instantiate(cfg.program.embedder)).complete(
        instantiate(cfg.program.question, _convert_="all"), "program.question")
    return load_module_state(stage, cfg.program.compiled, "question")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2")
    args = parser.parse_args()
    stage, reader = question_stage(), GGUFReader(model=args.model)
    rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rows = []  # (split, message index, probe vector, ROUGE-L, today's score)
    reads, started = 0, time.perf_counter()
    for split, names in SPLITS.items():
        for name in names:
            for case in load_cases(DATA / f"{name}.xml"):
                if not case.clinician_question:
                    continue
                found = stage(patient_narrative=case.patient_narrative)
                candidates = [r for r in (found.get("candidates") or []) if r["eligible"]]
                if not candidates:
                    continue
                message = stage.prepare(case.patient_narrative)
                vectors = reader.read_claims([[message]] * len(candidates), [c["question"] for c in candidates])
                reads += len(candidates)
                g = len({r[1] for r in rows})
                rows += [(split, g, v.astype(float), rouge.score(case.clinician_question, c["question"])["rougeL"].fmeasure,
                          c["score"]) for c, v in zip(candidates, vectors, strict=True)]
    print(f"{args.model}: {len({r[1] for r in rows})} messages, {reads} candidates read, "
          f"{(time.perf_counter() - started) / max(reads, 1):.2f} s a candidate (the stage's candidates included)")
    split = np.array([r[0] for r in rows])
    group = np.array([r[1] for r in rows])
    x, y, today = np.stack([r[2] for r in rows]), np.array([r[3] for r in rows]), np.array([r[4] for r in rows])
    train, val = split == "train", split == "val"
    mean, scale = standardisation(x[train])

    def picked(score: np.ndarray) -> float:
        """Mean ROUGE-L x100 over the validation messages of the candidate `score` ranks first."""
        return 100 * float(np.mean([y[idx[np.argmax(score[idx])]] for g in sorted(set(group[val].tolist()))
                                    for idx in [np.where(val & (group == g))[0]]]))

    print(f"\nvalidation ({len(set(group[val].tolist()))} messages): today's pick {picked(today):.2f}, "
          f"oracle {picked(y):.2f}\n")
    weights = (0.25, 0.5, 1.0, 2.0)
    print("| ridge alpha | probe alone |" + "".join(f" today + {w} x probe |" for w in weights))
    print("|---|---|" + "---|" * len(weights))
    z_today = (today - today[train].mean()) / today[train].std()
    for alpha in (10, 100, 1000, 10000):
        probe = Ridge(alpha=alpha).fit((x[train] - mean) / scale, y[train]).predict((x - mean) / scale)
        z = (probe - probe[train].mean()) / probe[train].std()
        print(f"| {alpha} | {picked(probe):.2f} |" + "".join(f" {picked(z_today + w * z):.2f} |" for w in weights))


if __name__ == "__main__":
    main()
