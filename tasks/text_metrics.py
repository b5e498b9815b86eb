"""Text-similarity metrics through their libraries, each as the official scorers call them.

A metric whose model cannot be loaded here returns `Unavailable(reason)` instead of a number: we never
invent a score.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean
from typing import Any

from common.packaged import resolve_model_path

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


@dataclass(frozen=True)
class Unavailable:
    reason: str


def rouge(references: list[str], predictions: list[str]) -> dict[str, float]:
    """Mean per-pair ROUGE F1 (0-1), as the official scorer: HF `evaluate`'s rouge on one pair at a time,
    i.e. `rouge_score` with its default tokenizer and no stemming."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=False)
    per_type: dict[str, list[float]] = {t: [] for t in ROUGE_TYPES}
    for ref, pred in zip(references, predictions, strict=True):
        scores = scorer.score(ref, pred)
        for t in ROUGE_TYPES:
            per_type[t].append(scores[t].fmeasure)
    return {t: mean(v) for t, v in per_type.items()}


def bleu(references: list[str], predictions: list[str]) -> float:
    """Mean per-pair BLEU (0-1): 13a tokenization, up to 4-grams, no smoothing, standard brevity penalty
    (what the official scorer's HF `evaluate` "bleu" computes), via sacrebleu."""
    import sacrebleu

    scores = [
        sacrebleu.corpus_bleu([p], [[r]], tokenize="13a", smooth_method="none").score / 100
        for r, p in zip(references, predictions, strict=True)
    ]
    return mean(scores)


def official_bleu_crashes(prediction: str) -> bool:
    """True where the official scorers' BLEU fails on one pair: HF `evaluate`'s bleu divides by the prediction's
    length after the 13a tokenizer (tensorflow/nmt `compute_bleu`), and 13a deletes `<skipped>`, so a text with no
    token left raises ZeroDivisionError there; sacrebleu (used here) scores it 0."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return not Tokenizer13a()(prediction).split()


@dataclass(frozen=True)
class BertScoreConfig:
    model_type: str
    num_layers: int | None = None
    rescale_with_baseline: bool = False
    batch_size: int = 8
    lang: str | None = "en"
    official: bool = False   # the model and rescaling of the official scorer (comparable to the leaderboard)


def bertscore_config(node: Any) -> BertScoreConfig | None:
    """`metrics.bertscore` (a `_target_` config) built by Hydra; None when BERTScore is switched off."""
    if not node:
        return None
    from hydra.utils import instantiate

    return instantiate(node)


def bertscore(references: list[str], predictions: list[str], cfg: BertScoreConfig) -> float | Unavailable:
    """Mean BERTScore F1 (0-1) with the configured model; Unavailable when it cannot be loaded here."""
    scores = bertscore_per_pair(references, predictions, cfg)
    return scores if isinstance(scores, Unavailable) else sum(scores) / len(scores)


def bertscore_per_pair(references: list[str], predictions: list[str], cfg: BertScoreConfig) -> list[float] | Unavailable:
    """BERTScore F1 of each pair with the configured model; Unavailable when it cannot be loaded here."""
    try:
        import bert_score

        kwargs: dict[str, Any] = {
            "model_type": resolve_model_path(cfg.model_type),
            "num_layers": cfg.num_layers,
            "batch_size": cfg.batch_size,
            "rescale_with_baseline": cfg.rescale_with_baseline,
            "lang": cfg.lang,
            "device": "cpu",
        }
        _, _, f1 = bert_score.score(predictions, references, **kwargs)
        return [float(x) for x in f1]
    except Exception as exc:  # offline hub access, missing baseline file, ...
        return Unavailable(f"bertscore with {cfg.model_type}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
