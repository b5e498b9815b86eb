"""Does a reader verifier learned from one writer's fabrications catch another writer's (issue #70 item 5)?

`python benchmarks/grounding_reader_transfer.py [--model qwen2.5-coder-1.5b|smollm2]`. Two sets of hand-written
fabricated answer sentences, each with its cases' reference answer sentences as the supported side:
- realistic: the 32 realistic cases, 130 reference sentences, 256 fabrications (data/archehr/fabrications_realistic.json);
- dev: the 37 dev + bundled cases, 140 reference sentences, 55 fabrications (benchmarks/fabrications_subtle.json).
Each sentence is read after its cited note sentences (lms/reader.py `read_claims`, as program/archehr/grounding=reader
reads it); a logistic head (class-balanced) per L2 strength C.
- realistic -> dev: what `experiment=compile_reader_verifier` does: fit on realistic, threshold on dev's reference
  sentences (at most 4% flagged), recall on dev's fabrications. C is chosen on dev there, so that row is optimistic.
- dev -> realistic: fit on dev, threshold from dev's case-grouped out-of-fold reference scores, recall and false flags
  on realistic, which chose nothing: the honest transfer number, from a fifth of the training fabrications.
Output: results_grounding_reader_transfer.txt.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common.logistic_fit import fit_scorer  # noqa: E402
from lms.reader import GGUFReader  # noqa: E402
from programs.archehr.grounding.reader_verifier import cited_answers, flag_threshold  # noqa: E402
from programs.archehr.grounding.verdicts import MAX_PREMISE_SENTENCES  # noqa: E402
from tasks.archehr.data import load_cases, load_key  # noqa: E402

DATA = ROOT / "data" / "archehr"
SETS = {"realistic": (["realistic_cases_a", "realistic_cases_b"], DATA / "fabrications_realistic.json"),
        "dev": (["dev_cases", "bundled_cases"], ROOT / "benchmarks" / "fabrications_subtle.json")}
C_GRID = (0.0001, 0.0003, 0.001, 0.003, 0.01)
MAX_FALSE_FLAGS = 0.04


def labelled(name: str) -> tuple[list[list[str]], list[str], np.ndarray, np.ndarray]:
    """(cited note texts, sentence, 1 = fabricated, case id) of one set's reference sentences and fabrications."""
    files, fabrications = SETS[name]
    made = json.loads(fabrications.read_text())["cases"]
    notes, texts, labels, cases = [], [], [], []
    for stem in files:
        key = load_key(DATA / f"{stem}_key.json")
        for case in load_cases(DATA / f"{stem}.xml"):
            by_id = {s.id: s.text for s in case.sentences}
            rows = [(cited, text, 0) for text, cited in cited_answers(case, key[case.case_id])]
            rows += [([by_id[i] for i in f["citations"]][:MAX_PREMISE_SENTENCES], f["text"], 1)
                     for f in made.get(case.case_id, [])]
            for cited, text, label in rows:
                notes.append(cited), texts.append(text), labels.append(label), cases.append(case.case_id)
    return notes, texts, np.array(labels), np.array(cases)


def oof_reference_threshold(x: np.ndarray, y: np.ndarray, cases: np.ndarray, c: float, names: tuple[str, ...]) -> float:
    """The threshold flagging at most MAX_FALSE_FLAGS of the training set's reference sentences, scored out of fold
    (5 case-grouped folds): what a threshold chosen without a validation set would be."""
    ids = sorted(set(cases.tolist()))
    np.random.default_rng(0).shuffle(ids)
    oof = np.zeros(len(y))
    for k in range(5):
        test = np.isin(cases, ids[k::5])
        oof[test] = fit_scorer(x[~test], y[~test], names, c, class_weight="balanced").probabilities(x[test])
    return flag_threshold(oof[y == 0], MAX_FALSE_FLAGS)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    args = parser.parse_args()
    reader = GGUFReader(model=args.model)
    read = {}
    for name in SETS:
        notes, texts, y, cases = labelled(name)
        start = time.perf_counter()
        read[name] = (reader.read_claims(notes, texts).astype(float), y, cases)
        print(f"{name}: {len(y) - int(y.sum())} reference sentences, {int(y.sum())} fabricated; "
              f"{(time.perf_counter() - start) / len(y):.2f} s a sentence (0 where DSPy's cache had them)")
    names = tuple(f"reader_{i}" for i in range(reader.dim))
    print(f"\n{args.model}\n\n| trained on -> scored on | C | AUC | recall | false flags | threshold from |")
    print("|---|---|---|---|---|---|")
    for train, test in (("realistic", "dev"), ("dev", "realistic")):
        x, y, cases = read[train]
        tx, ty, _ = read[test]
        for c in C_GRID:
            p = fit_scorer(x, y, names, c, class_weight="balanced").probabilities(tx)
            if train == "realistic":
                threshold, source = flag_threshold(p[ty == 0], MAX_FALSE_FLAGS), "dev's references"
            else:
                threshold, source = oof_reference_threshold(x, y, cases, c, names), "dev's references, out of fold"
            print(f"| {train} -> {test} | {c} | {roc_auc_score(ty, p):.3f} | {(p[ty == 1] >= threshold).mean():.3f} "
                  f"| {(p[ty == 0] >= threshold).mean():.3f} | {source} |")


if __name__ == "__main__":
    main()
