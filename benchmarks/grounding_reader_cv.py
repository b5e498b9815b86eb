"""Can a small LM's reading tell a subtle fabrication from a correct answer sentence (issue #70 item 5)?

`python benchmarks/grounding_reader_cv.py [--model smollm2|qwen2.5-coder-1.5b]`: the 140 reference answer sentences of
the 37 dev and bundled cases (supported) and the 55 hand-written subtle fabrications (benchmarks/fabrications_subtle.json,
not supported), each read with its cited note sentences in one prompt ("Is every detail of the claim supported by the
note? Answer yes or no."), the last token's hidden state (lms/reader.py's model loading). A logistic regression,
case-grouped 5-fold CV inside this set (the set is small: this says whether the signal is there, not what a fitted
verifier scores on unseen fabrications). Reported: out-of-fold AUC, and recall at <= 5% false flags at one threshold
over the out-of-fold scores. Output: results_grounding_reader_cv.txt.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lms.reader import GGUFReader  # noqa: E402
from tasks.archehr.data import load_cases, load_key  # noqa: E402

DATA = ROOT / "data" / "archehr"
PROMPT = ("Note:\n{note}\nClaim: {claim}\nIs every detail of the claim supported by the note? Answer yes or no.")


def examples() -> list[tuple[str, str, str, int]]:
    """(case id, cited note text, claim, 1 = fabricated)."""
    out = []
    fabricated = json.loads((ROOT / "benchmarks" / "fabrications_subtle.json").read_text())["cases"]
    for name in ("dev_cases", "bundled_cases"):
        key = load_key(DATA / f"{name}_key.json")
        for case in load_cases(DATA / f"{name}.xml"):
            text = {s.id: s.text for s in case.sentences}
            for _, claim, cites in key[case.case_id].answer_sentences:
                out.append((case.case_id, "\n".join(text[i] for i in cites if i in text), claim, 0))
            for f in fabricated.get(case.case_id, []):
                out.append((case.case_id, "\n".join(text[i] for i in f["citations"] if i in text), f["text"], 1))
    return out


def read(reader: GGUFReader, note: str, claim: str) -> np.ndarray:
    llm, batch, lock = reader._llm()
    with lock:
        tokens = (llm.tokenize(b"<|im_start|>user\n", add_bos=True, special=True)
                  + reader._tokens(llm, PROMPT.format(note=note, claim=claim))
                  + reader._tokens(llm, "<|im_end|>\n<|im_start|>assistant\n", special=True))
        return reader._hidden(llm, batch, tokens)[-1]


def recall_at(scores: np.ndarray, y: np.ndarray, rate: float = 0.05) -> tuple[float, float]:
    """(recall, false flags) at the one threshold over every fold's out-of-fold scores that flags at most `rate` of
    the supported sentences (one threshold for all folds: optimistic for every row alike)."""
    supported = np.sort(scores[y == 0])
    threshold = supported[min(len(supported) - 1, int(np.floor((1 - rate) * len(supported))))]
    return float((scores[y == 1] > threshold).mean()), float((scores[y == 0] > threshold).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2")
    args = parser.parse_args()
    data = examples()
    reader = GGUFReader(model=args.model)
    start = time.perf_counter()
    x = np.stack([read(reader, note, claim) for _, note, claim, _ in data]).astype(float)
    seconds = (time.perf_counter() - start) / len(data)
    y = np.array([label for *_, label in data])
    ids = sorted({c for c, *_ in data})
    random.Random(0).shuffle(ids)
    folds = [set(ids[i::5]) for i in range(5)]
    case = np.array([c for c, *_ in data])
    print(f"{args.model}: {len(data)} sentences ({int(y.sum())} fabricated) on {len(ids)} cases; "
          f"{seconds:.2f} s a sentence")
    print("| C | AUC | recall at <= 5% false flags | false flags |")
    print("|---|---|---|---|")
    for c in (0.001, 0.003, 0.01, 0.03):
        oof = np.zeros(len(y))
        for fold in folds:
            test = np.isin(case, list(fold))
            train = ~test
            scale = StandardScaler().fit(x[train])
            model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced").fit(scale.transform(x[train]),
                                                                                       y[train])
            oof[test] = model.decision_function(scale.transform(x[test]))
        recall, false = recall_at(oof, y)
        print(f"| {c} | {roc_auc_score(y, oof):.3f} | {recall:.3f} | {false:.3f} |")


if __name__ == "__main__":
    main()
