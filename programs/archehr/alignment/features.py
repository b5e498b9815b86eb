"""Features of the learned aligner: one row per (answer sentence, note sentence) pair. Similarities are read relative
to the note (MiniLM cosines and BM25 scores shift between notes, their order within one much less). The names are part
of a fitted state: changing a feature means bumping ALIGNMENT_FEATURE_SET.
"""

from __future__ import annotations

import math
import re

import numpy as np

from programs.archehr.shared.claims import content_quantities, named_drugs
from programs.archehr.shared.clinical_lexicon import concepts
from programs.archehr.shared.features import neighbour_max
from programs.archehr.shared.lexical import bm25_scores, tokens
from programs.archehr.shared.note_layout import KINDS, layout
from retrieval.embed import Embedder

ALIGNMENT_FEATURE_SET = "alignment/2"   # 2: the whole answer is the mean of its sentences'

ALIGNMENT_FEATURES: tuple[str, ...] = (
    "dense", "dense_relative", "dense_gap", "dense_rank_inverse", "dense_z",
    "bm25_relative", "bm25_rank_inverse",
    "quantities_matched", "quantities_share", "specific_quantities_matched", "drugs_shared", "concepts_shared",
    "concepts_share", "stems_share",
    "neighbour_dense_relative", "competition", "position_distance",
    "answer_dense_relative", "answer_bm25_relative", "adjacent_to_best", "note_stems_share", "note_quantities_share",
    "clause_dense_relative", "clause_rank_inverse", "clause_bm25_relative", "clause_stems_share",
    *(f"kind_{k}" for k in KINDS), "words_log",
)
_STEM = re.compile(r"[a-z]{4,}")

_CLAUSE_BREAK = re.compile(r"\s*[;:]\s*|,\s+(?=(?:and|but|so|which|while|because|after|then|since|as|with|if|until)\b)"
                           r"|\s+(?=(?:because|so that|while|after which|whereas)\b)")


def clauses(text: str) -> list[str]:
    """The statements of one answer sentence (at least 3 words each); the sentence itself when it has one."""
    parts = [p.strip(" ,.") for p in _CLAUSE_BREAK.split(text) if len(p.split()) >= 3]
    return parts if len(parts) > 1 else [text]


def _normalized(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _specific(q) -> bool:
    """A quantity that identifies a statement: with a unit, a decimal, or a number above 12 (not "2 of them")."""
    return bool(q.dimension) or q.raw != int(q.raw) or q.raw > 12


def _stems(text: str) -> set[str]:
    return {w[:5] for w in _STEM.findall(" ".join(tokens(text)))}


def alignment_features(embedder: Embedder, answers: list[str], texts: list[str]) -> np.ndarray:
    """Shape (len(answers), len(texts), len(ALIGNMENT_FEATURES)): each answer sentence against each note sentence."""
    m, n = len(answers), len(texts)
    out = np.zeros((m, n, len(ALIGNMENT_FEATURES)))
    if not m or not n:
        return out
    lay = layout(texts)
    answer_clauses = [clauses(a) for a in answers]
    flat_clauses = [c for cs in answer_clauses for c in cs]
    queries = embedder.encode_queries([*answers, *flat_clauses])
    documents = embedder.encode_documents(texts)
    # the answer as a whole is the mean of its sentences' vectors (nothing more to embed)
    all_sims = np.asarray(np.vstack([queries, _normalized(queries[:m].mean(axis=0))[None, :]]) @ documents.T,
                          dtype=float)
    sims, clause_sims, whole = all_sims[:m], all_sims[m:-1], all_sims[-1]
    clause_start = np.cumsum([0, *(len(cs) for cs in answer_clauses)])
    whole_relative = whole / whole.max() if whole.max() > 0 else np.zeros(n)
    whole_bm25 = np.array(bm25_scores(" ".join(answers), texts))
    whole_bm25 = whole_bm25 / whole_bm25.max() if whole_bm25.max() > 0 else np.zeros(n)
    best_other = np.array([np.delete(sims, i, axis=0).max(axis=0) if m > 1 else np.zeros(n) for i in range(m)])
    note_quantities = [content_quantities(t) for t in texts]
    note_drugs = [named_drugs(t) for t in texts]
    note_concepts = [concepts(t) for t in texts]
    note_stems = [_stems(t) for t in texts]
    words_log = np.array([math.log1p(len(t.split())) for t in texts])
    kinds = np.array([[float(k == kind) for kind in KINDS] for k in lay.kinds])
    position = np.arange(n) / max(n - 1, 1)
    col = {name: i for i, name in enumerate(ALIGNMENT_FEATURES)}
    for i, answer in enumerate(answers):
        row = sims[i]
        best = row.max()
        order = (-row).argsort(kind="stable")
        ranks = np.empty(n)
        ranks[order] = np.arange(n)
        bm25 = np.array(bm25_scores(answer, texts))
        bm_best = bm25.max() if n else 0.0
        bm_order = (-bm25).argsort(kind="stable")
        bm_ranks = np.empty(n)
        bm_ranks[bm_order] = np.arange(n)
        relative = row / best if best > 0 else np.zeros(n)
        a_quantities, a_drugs, a_concepts, a_stems = (content_quantities(answer), named_drugs(answer), concepts(answer),
                                                      _stems(answer))
        a_specific = [q for q in a_quantities if _specific(q)]
        f = out[i]
        f[:, col["dense"]] = row
        f[:, col["dense_relative"]] = relative
        f[:, col["dense_gap"]] = best - row
        f[:, col["dense_rank_inverse"]] = 1.0 / (1.0 + ranks)
        f[:, col["dense_z"]] = (row - row.mean()) / row.std() if row.std() > 0 else 0.0
        f[:, col["bm25_relative"]] = bm25 / bm_best if bm_best > 0 else 0.0
        f[:, col["bm25_rank_inverse"]] = 1.0 / (1.0 + bm_ranks)
        for j in range(n):
            matched = sum(any(q.matches(p, 0.05) for p in note_quantities[j]) for q in a_quantities)
            f[j, col["quantities_matched"]] = math.log1p(matched)
            f[j, col["quantities_share"]] = matched / len(a_quantities) if a_quantities else 0.0
            f[j, col["specific_quantities_matched"]] = sum(
                any(q.matches(p, 0.05) for p in note_quantities[j]) for q in a_specific)
            f[j, col["drugs_shared"]] = len(a_drugs & note_drugs[j])
            shared = len(a_concepts & note_concepts[j])
            f[j, col["concepts_shared"]] = math.log1p(shared)
            f[j, col["concepts_share"]] = shared / len(a_concepts) if a_concepts else 0.0
            f[j, col["stems_share"]] = len(a_stems & note_stems[j]) / len(a_stems) if a_stems else 0.0
            f[j, col["note_stems_share"]] = len(a_stems & note_stems[j]) / len(note_stems[j]) if note_stems[j] else 0.0
            f[j, col["note_quantities_share"]] = (
                sum(any(p.matches(q, 0.05) for q in a_quantities) for p in note_quantities[j]) / len(note_quantities[j])
                if note_quantities[j] else 0.0)
        f[:, col["neighbour_dense_relative"]] = neighbour_max(relative)
        f[:, col["competition"]] = row - best_other[i]
        f[:, col["position_distance"]] = np.abs(position - (i / max(m - 1, 1)))
        own = clause_sims[clause_start[i]:clause_start[i + 1]]
        own_best = own.max(axis=1, keepdims=True)
        own_relative = np.where(own_best > 0, own / np.where(own_best > 0, own_best, 1.0), 0.0)
        own_ranks = (-own).argsort(axis=1, kind="stable").argsort(axis=1, kind="stable")
        f[:, col["clause_dense_relative"]] = own_relative.max(axis=0)
        f[:, col["clause_rank_inverse"]] = (1.0 / (1.0 + own_ranks)).max(axis=0)
        clause_bm25, clause_stems = np.zeros(n), np.zeros(n)
        for clause in answer_clauses[i]:
            scores = np.array(bm25_scores(clause, texts))
            if scores.max() > 0:
                clause_bm25 = np.maximum(clause_bm25, scores / scores.max())
            stems = _stems(clause)
            if stems:
                clause_stems = np.maximum(clause_stems, [len(stems & note_stems[j]) / len(stems) for j in range(n)])
        f[:, col["clause_bm25_relative"]] = clause_bm25
        f[:, col["clause_stems_share"]] = clause_stems
        f[:, col["answer_dense_relative"]] = whole_relative
        f[:, col["answer_bm25_relative"]] = whole_bm25
        f[:, col["adjacent_to_best"]] = (np.abs(np.arange(n) - order[0]) == 1).astype(float)
        f[:, col["words_log"]] = words_log
        start = col[f"kind_{KINDS[0]}"]
        f[:, start:start + len(KINDS)] = kinds
    return out
