"""Metrics equal to the official MEDIQA-CORR 2024 script (`mediqa-corr-2024-eval-script-2-all-metrics`).

Flag and sentence accuracy over the reference texts (a missing prediction is wrong). Corrections: NA/NA scores 1, one
NA 0, else the metric of the pair; each composite is (sum over pairs + correct NA) / texts, for ROUGE-1/2/L F (the
`rouge` package), BERTScore F1 and BLEURT (clipped to [0, 1]); AggregateC averages the available metrics per pair.
BERTScore is rescaled `microsoft/deberta-xlarge-mnli` officially (needs the hub), else a configured local model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.mediqa_corr.data import Note
from tasks.mediqa_corr.submission import Correction
from tasks.text_metrics import BertScoreConfig, Unavailable, bertscore_per_pair


@dataclass(frozen=True)
class CorrMetricsConfig:
    bertscore: BertScoreConfig | None = None
    bleurt_checkpoint: str | None = None


def _clip(x: float) -> float:
    return max(0.0, min(1.0, x))


def accuracy(notes: list[Note], predictions: dict[str, Correction]) -> dict[str, float]:
    """As the official script: flag and sentence id compared as strings (a zero-padded "01" is not "1")."""
    flags = sum(1 for n in notes if n.text_id in predictions
                and predictions[n.text_id].flag_as_written == str(n.error_flag))
    sents = sum(1 for n in notes if n.text_id in predictions
                and predictions[n.text_id].sentence_id_as_written == str(n.error_sentence_id))
    return {"error_flag_accuracy": flags / len(notes), "error_sentence_accuracy": sents / len(notes)}


def nlg_pairs(notes: list[Note], predictions: dict[str, Correction]) -> tuple[list[str], list[str], dict[str, int]]:
    refs, preds = [], []
    counters = {"total_texts": 0, "reference_na": 0, "total_system_texts": 0, "system_provided_na": 0,
                "system_provided_correct_na": 0}
    for note in notes:
        counters["total_texts"] += 1
        ref = note.corrected_sentence if note.error_flag == 1 and note.corrected_sentence else "NA"
        counters["reference_na"] += ref == "NA"
        pred = predictions.get(note.text_id)
        if pred is None:
            continue
        counters["total_system_texts"] += 1
        cand = pred.corrected  # "NA" exactly when the flag was written "0" (the official rule)
        counters["system_provided_na"] += cand == "NA"
        if ref == "NA" and cand == "NA":
            counters["system_provided_correct_na"] += 1
        elif ref != "NA" and cand != "NA":
            refs.append(ref)
            preds.append(cand)
    return refs, preds, counters


def rouge_rejects(text: str) -> bool:
    """The `rouge` package splits a text into sentences at "." and drops empty pieces; with none left ("...", "")
    it raises "Hypothesis is empty" (or "Reference is empty"), and the official script stops there."""
    return not [piece for piece in text.split(".") if piece]


def _rouge(refs: list[str], preds: list[str]) -> dict[str, list[float]]:
    from rouge import Rouge

    out: dict[str, list[float]] = {"rouge-1": [], "rouge-2": [], "rouge-l": []}
    scorer = Rouge()
    for ref, pred in zip(refs, preds, strict=True):
        if rouge_rejects(pred) or rouge_rejects(ref):  # scored 0 here (the official script crashes: see notes)
            for key in out:
                out[key].append(0.0)
            continue
        scores = scorer.get_scores([pred], [ref])[0]
        for key in out:
            out[key].append(scores[key]["f"])
    return out


def _bleurt(refs: list[str], preds: list[str], checkpoint: str | None) -> list[float] | Unavailable:
    if not checkpoint:
        return Unavailable("BLEURT needs a BLEURT-20 checkpoint (metrics.bleurt_checkpoint) and the bleurt package")
    try:
        from bleurt import score as bleurt_score

        return [float(s) for s in bleurt_score.BleurtScorer(checkpoint=checkpoint).score(references=refs, candidates=preds)]
    except Exception as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        return Unavailable(f"BLEURT with {checkpoint}: {type(exc).__name__}: {first}")


def official_crash_notes(refs: list[str], preds: list[str], predictions: dict[str, Correction],
                         bertscore_on: bool) -> list[str]:
    """Where the official script stops on this submission while clinprog scores it: one line each."""
    notes = []
    crashed = [c for c in predictions.values() if c.official_crash]
    if crashed:
        notes.append(f"the official script crashes on this submission ({crashed[0].official_crash} while it parses "
                     f"the line of {crashed[0].text_id}; {len(crashed)} such line(s)): clinprog reads those lines "
                     "as written")
    empty = [p for r, p in zip(refs, preds, strict=True) if rouge_rejects(p) or rouge_rejects(r)]
    if empty:
        notes.append(f"the official script crashes on this submission (the rouge package raises 'Hypothesis is "
                     f"empty' on the correction {empty[0]!r}, which has no word between its dots; {len(empty)} "
                     "such pair(s)): clinprog scores those pairs 0")
    if bertscore_on and not preds:
        notes.append("the official script crashes on this submission (BERTScore on no correction pairs: every "
                     "text is predicted or labelled 'no error'): clinprog gives BERTC = correct 'no error' / texts")
    return notes


def score(notes: list[Note], predictions: dict[str, Correction], cfg: CorrMetricsConfig) -> dict[str, Any]:
    unlabelled = [n.text_id for n in notes if not n.has_labels]
    if unlabelled:
        raise ValueError(f"cannot score: {len(unlabelled)} notes have no ground truth (e.g. {unlabelled[0]})")
    result: dict[str, Any] = accuracy(notes, predictions)
    refs, preds, counters = nlg_pairs(notes, predictions)
    total, correct_na = counters["total_texts"], counters["system_provided_correct_na"]
    result["counters"] = counters
    unavailable: dict[str, str] = {}
    components: list[list[float]] = []

    rouge = _rouge(refs, preds)
    for key, name in (("rouge-1", "R1FC"), ("rouge-2", "R2FC"), ("rouge-l", "RLFC")):
        result[name] = (sum(rouge[key]) + correct_na) / total
    components.append(rouge["rouge-1"])

    if cfg.bertscore is None:
        bs: list[float] | Unavailable = Unavailable("no BERTScore model configured")
    else:
        bs = bertscore_per_pair(refs, preds, cfg.bertscore) if preds else []
    bl = _bleurt(refs, preds, cfg.bleurt_checkpoint) if preds or not cfg.bleurt_checkpoint else []
    for name, metric, values in (("BERTC", "bertscore", bs), ("BLEURTC", "bleurt", bl)):
        if isinstance(values, Unavailable):
            result[name], unavailable[metric] = None, values.reason
        else:
            clipped = [_clip(x) for x in values]
            result[name] = (sum(clipped) + correct_na) / total
            components.append(clipped)

    per_pair = [sum(c[i] for c in components) / len(components) for i in range(len(preds))]
    result["AggregateC"] = (sum(per_pair) + correct_na) / total
    result["AggregateC_components"] = ["rouge1"] + [m for m, k in (("bertscore", "BERTC"), ("bleurt", "BLEURTC"))
                                                    if result.get(k) is not None]
    result["unavailable"] = unavailable
    crash_notes = official_crash_notes(refs, preds, predictions, cfg.bertscore is not None)
    if crash_notes:
        result["notes"] = crash_notes
    return result
