"""SARI (Xu et al., 2016) as HF `evaluate`'s "sari" computes it for the official ArchEHR-QA scorer, written from the
definition since no offline package ships it; checked against the HF metric card's example."""

from __future__ import annotations

from collections import Counter

from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

_tokenize = Tokenizer13a()


def normalize(text: str) -> str:
    return _tokenize(text.lower())


def _ngrams(tokens: list[str], n: int) -> list[str]:
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p > 0 or r > 0 else 0.0


def _sari_ngram(source: list[str], output: list[str], refs: list[list[str]], num_refs: int) -> tuple[float, float, float]:
    ref_counts = Counter(g for ref in refs for g in ref)
    src_counts = Counter(source)
    out_counts = Counter(output)
    src_rep = Counter({g: c * num_refs for g, c in src_counts.items()})
    out_rep = Counter({g: c * num_refs for g, c in out_counts.items()})

    keep = src_rep & out_rep
    keep_good = keep & ref_counts
    keep_all = src_rep & ref_counts
    keep_p = sum(keep_good[g] / keep[g] for g in keep) / len(keep) if keep else 1.0
    keep_r = sum(keep_good[g] for g in keep) / sum(keep_all.values()) if keep_all else 1.0

    deleted = src_rep - out_rep
    deleted_good = deleted - ref_counts
    del_p = sum(deleted_good[g] / deleted[g] for g in deleted) / len(deleted) if deleted else 1.0

    added = set(out_counts) - set(src_counts)
    added_good = added & set(ref_counts)
    added_all = set(ref_counts) - set(src_counts)
    add_p = len(added_good) / len(added) if added else 1.0
    add_r = len(added_good) / len(added_all) if added_all else 1.0
    return _f1(keep_p, keep_r), del_p, _f1(add_p, add_r)


def sari_sentence(source: str, prediction: str, references: list[str]) -> float:
    """SARI of one prediction on a 0-1 scale."""
    s1, c1 = normalize(source).split(" "), normalize(prediction).split(" ")
    r1 = [normalize(r).split(" ") for r in references]
    keep, delete, add = [], [], []
    for n in range(1, 5):
        k, d, a = _sari_ngram(_ngrams(s1, n), _ngrams(c1, n), [_ngrams(r, n) for r in r1], len(references))
        keep.append(k)
        delete.append(d)
        add.append(a)
    return (sum(keep) / 4 + sum(delete) / 4 + sum(add) / 4) / 3


def sari(sources: list[str], predictions: list[str], references: list[list[str]]) -> float:
    """Corpus SARI on the 0-100 scale, the mean of sentence scores (as HF `evaluate`'s "sari")."""
    if not (len(sources) == len(predictions) == len(references)):
        raise ValueError("sari: sources, predictions and references must have the same length")
    if not predictions:
        raise ValueError("sari: nothing to score")
    return 100 * sum(sari_sentence(s, p, r) for s, p, r in zip(sources, predictions, references, strict=True)) / len(predictions)
