"""Features of the learned evidence scorer: one row per note sentence. Similarities are read relative to the note
(MiniLM cosines and BM25 scores shift between notes, their order within one much less). The names are part of a fitted
state: changing a feature means bumping EVIDENCE_FEATURE_SET.
"""

from __future__ import annotations

import math
import re

import numpy as np

from common.note_text import split_sentences
from programs.archehr.shared.claims import content_quantities, named_drugs, quantities
from programs.archehr.shared.clinical_lexicon import concepts
from programs.archehr.shared.features import neighbour_max
from programs.archehr.shared.lexical import bm25_scores
from programs.archehr.shared.note_layout import KINDS, SECTIONS, layout, placeholder_share
from retrieval.embed import Embedder

EVIDENCE_FEATURE_SET = "evidence/1"

_SIMILARITIES = ("question_dense", "narrative_dense", "both_dense", "narrative_sentence_dense",
                 "narrative_question_dense", "question_bm25", "narrative_bm25")
EVIDENCE_FEATURES: tuple[str, ...] = (
    *(f"{s}_{view}" for s in _SIMILARITIES for view in ("relative", "rank", "z")),
    "question_dense_raw", "both_dense_raw",
    "question_concepts", "narrative_concepts", "question_drugs",
    "neighbour_both_relative", "neighbour_question_relative",
    "reason_cue", "plan_cue", "finding_cue", "why_x_reason", "when_x_time",
    *(f"kind_{k}" for k in KINDS), *(f"section_{s}" for s in SECTIONS),
    "position", "position_first_fifth", "position_last_fifth", "note_sentences_log",
    "words_log", "quantities_log", "drugs_log", "placeholder_share",
)
# what kind of statement a note sentence is: an explanation, a plan, a result
_REASON = re.compile(r"\b(because|given|due to|therefore|so that|since|as a result|in order to|to prevent|to reduce|"
                     r"to allow|risk|caused|precipitated|triggered|which (?:can|may|lowers|raises)|thus)\b", re.I)
_PLAN = re.compile(r"\b(will|plan|planned|continue|recommend|recommended|follow|should|expected|until|weeks?|"
                   r"months?)\b", re.I)
_FINDING = re.compile(r"\b(showed|shows|revealed|consistent with|confirmed|demonstrated|found|positive|negative)\b",
                      re.I)
_WHY = re.compile(r"\b(why|what caused|cause|reason)\b", re.I)
_WHEN = re.compile(r"\b(when|how long|how soon|how many|until)\b", re.I)


def _views(values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value / best, rank share (1 best .. 0 worst), z-score) over the sentences in `mask` (others get 0)."""
    out_rel, out_rank, out_z = (np.zeros_like(values, dtype=float) for _ in range(3))
    if not mask.any():
        return out_rel, out_rank, out_z
    v = values[mask].astype(float)
    best = v.max()
    out_rel[mask] = v / best if best > 0 else 0.0
    order = (-v).argsort(kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v))
    out_rank[mask] = 1.0 - ranks / max(len(v) - 1, 1)
    std = v.std()
    out_z[mask] = (v - v.mean()) / std if std > 0 else 0.0
    return out_rel, out_rank, out_z


def evidence_features(embedder: Embedder, question: str, narrative: str, texts: list[str]) -> np.ndarray:
    """One row per note sentence, columns EVIDENCE_FEATURES."""
    n = len(texts)
    lay = layout(texts)
    content = np.array([k != "header" for k in lay.kinds])
    narrative_sentences = split_sentences(narrative)[:12] or [narrative]
    asked = [i for i, t in enumerate(narrative_sentences) if t.rstrip().endswith("?")] or list(
        range(len(narrative_sentences)))
    # one call per side: the anchors, then the note's sentences
    queries = embedder.encode_queries([question, narrative, f"{question} {narrative}", *narrative_sentences])
    sims = queries @ embedder.encode_documents(texts).T
    dense = {"question_dense": sims[0], "narrative_dense": sims[1], "both_dense": sims[2],
             "narrative_sentence_dense": sims[3:].max(axis=0),
             "narrative_question_dense": sims[[3 + i for i in asked]].max(axis=0)}
    lexical = {"question_bm25": np.array(bm25_scores(question, texts)),
               "narrative_bm25": np.array(bm25_scores(narrative, texts))}
    columns: dict[str, np.ndarray] = {}
    for name, values in {**dense, **lexical}.items():
        rel, rank, z = _views(np.asarray(values, dtype=float), content)
        columns[f"{name}_relative"], columns[f"{name}_rank"], columns[f"{name}_z"] = rel, rank, z
    columns["question_dense_raw"] = np.asarray(sims[0], dtype=float)
    columns["both_dense_raw"] = np.asarray(sims[2], dtype=float)
    q_concepts, n_concepts, q_drugs = concepts(question), concepts(narrative), named_drugs(f"{question} {narrative}")
    sentence_concepts = [concepts(t) for t in texts]
    columns["question_concepts"] = np.array([len(c & q_concepts) for c in sentence_concepts], dtype=float)
    columns["narrative_concepts"] = np.array([math.log1p(len(c & n_concepts)) for c in sentence_concepts])
    columns["question_drugs"] = np.array([float(bool(named_drugs(t) & q_drugs)) for t in texts])
    columns["neighbour_both_relative"] = neighbour_max(columns["both_dense_relative"])
    columns["neighbour_question_relative"] = neighbour_max(columns["question_dense_relative"])
    reason = np.array([float(bool(_REASON.search(t))) for t in texts])
    columns["reason_cue"] = reason
    columns["plan_cue"] = np.array([float(bool(_PLAN.search(t))) for t in texts])
    columns["finding_cue"] = np.array([float(bool(_FINDING.search(t))) for t in texts])
    columns["why_x_reason"] = reason * float(bool(_WHY.search(question)))
    has_time = np.array([float(any(q.dimension == "time" for q in quantities(t))) for t in texts])
    columns["when_x_time"] = has_time * float(bool(_WHEN.search(question)))
    for k in KINDS:
        columns[f"kind_{k}"] = np.array([float(x == k) for x in lay.kinds])
    for s in SECTIONS:
        columns[f"section_{s}"] = np.array([float(x == s) for x in lay.sections])
    position = np.arange(n) / max(n - 1, 1)
    columns["position"] = position
    columns["position_first_fifth"] = (position < 0.2).astype(float)
    columns["position_last_fifth"] = (position > 0.8).astype(float)
    columns["note_sentences_log"] = np.full(n, math.log(max(n, 1)))
    columns["words_log"] = np.array([math.log1p(len(t.split())) for t in texts])
    columns["quantities_log"] = np.array([math.log1p(len(content_quantities(t))) for t in texts])
    columns["drugs_log"] = np.array([math.log1p(len(named_drugs(t))) for t in texts])
    columns["placeholder_share"] = np.array([placeholder_share(t) for t in texts])
    return np.column_stack([columns[name] for name in EVIDENCE_FEATURES]) if n else np.zeros((0, len(EVIDENCE_FEATURES)))
