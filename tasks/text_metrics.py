"""Text-similarity metrics through their libraries, each as the official scorers call them. A metric whose model
cannot be loaded here returns `Unavailable(reason)`, never an invented number."""

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
    """Mean per-pair ROUGE F1 (0-1), as the official scorer's HF `evaluate` rouge on one pair at a time."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=False)
    per_type: dict[str, list[float]] = {t: [] for t in ROUGE_TYPES}
    for ref, pred in zip(references, predictions, strict=True):
        scores = scorer.score(ref, pred)
        for t in ROUGE_TYPES:
            per_type[t].append(scores[t].fmeasure)
    return {t: mean(v) for t, v in per_type.items()}


def bleu(references: list[str], predictions: list[str]) -> float:
    """Mean per-pair BLEU (0-1) as the official scorer's HF `evaluate` "bleu" computes it, via sacrebleu."""
    import sacrebleu

    scores = [
        sacrebleu.corpus_bleu([p], [[r]], tokenize="13a", smooth_method="none").score / 100
        for r, p in zip(references, predictions, strict=True)
    ]
    return mean(scores)


def official_bleu_crashes(prediction: str) -> bool:
    """True where the official scorers' BLEU raises ZeroDivisionError: no token left after the 13a tokenizer (which
    deletes `<skipped>`); sacrebleu scores it 0."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return not Tokenizer13a()(prediction).split()


@dataclass(frozen=True)
class BertScoreConfig:
    model_type: str
    num_layers: int | None = None
    rescale_with_baseline: bool = False
    batch_size: int = 8
    lang: str | None = "en"
    official: bool = False   # the official scorer's model and rescaling (comparable to the leaderboard)


def bertscore_config(node: Any) -> BertScoreConfig | None:
    """`metrics.bertscore` (a `_target_` config) built by Hydra; None when BERTScore is switched off."""
    if not node:
        return None
    from hydra.utils import instantiate

    return instantiate(node)


def bertscore(references: list[str], predictions: list[str], cfg: BertScoreConfig) -> float | Unavailable:
    """Mean BERTScore F1 (0-1)."""
    scores = bertscore_per_pair(references, predictions, cfg)
    return scores if isinstance(scores, Unavailable) else sum(scores) / len(scores)


def bertscore_per_pair(references: list[str], predictions: list[str], cfg: BertScoreConfig) -> list[float] | Unavailable:
    """BERTScore F1 of each pair with the configured model; Unavailable when it cannot be loaded here."""
    try:
        import bert_score

        _, _, f1 = bert_score.score(predictions, references, model_type=resolve_model_path(cfg.model_type),
                                    num_layers=cfg.num_layers, batch_size=cfg.batch_size,
                                    rescale_with_baseline=cfg.rescale_with_baseline, lang=cfg.lang, device="cpu")
        return [float(x) for x in f1]
    except Exception as exc:  # offline hub access, missing baseline file, ...
        return Unavailable(f"bertscore with {cfg.model_type}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
