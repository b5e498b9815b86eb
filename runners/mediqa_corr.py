"""`program=mediqa_corr`: run MedReAct'N'MedReFlex over notes; write predictions, the submission and scores."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lms import build_role_lms
from programs.mediqa_corr import MedReActNMedReFlex
from programs.mediqa_corr.pipeline import ROLES
from runners.common import bertscore_config, configure_dspy, output_dir, run_resumable, write_json
from tasks.archehr.submission import PredictionLog
from tasks.mediqa_corr.data import Note, load_notes
from tasks.mediqa_corr.metrics import CorrMetricsConfig, score
from tasks.mediqa_corr.submission import Correction, read_submission, write_submission

log = logging.getLogger(__name__)


def build_search(cfg: DictConfig):
    if not cfg.program.search.enabled:
        return None
    from runners.retrieval import build_retriever

    retriever = build_retriever(cfg)
    retriever.backend.check_embedder()  # a missing index or another embedder fails here, before any note
    max_chars, max_passages = int(cfg.program.search.max_chars), int(cfg.program.search.max_passages)

    def search(query: str) -> str:
        passages = retriever.search(query)[:max_passages]
        return "\n".join(f"[{i}] {p.title}: {p.text[:max_chars]}" for i, p in enumerate(passages, 1))

    return search


def build_program(cfg: DictConfig, role_lms=None, search=None) -> MedReActNMedReFlex:
    p = cfg.program
    program = MedReActNMedReFlex(
        max_steps=p.react.max_steps, max_episodes=p.reflexion.max_episodes, avg_threshold=p.eval.avg_threshold,
        min_threshold=p.eval.min_threshold, criteria=dict(p.eval.criteria), review_samples=p.eval.samples,
        review_temperature=p.eval.temperature, search=search, role_lms=role_lms)
    if p.get("compiled"):
        from optimizers.compile import load_compiled

        load_compiled(program, p.compiled)
    return program


def record(pred, note: Note) -> dict[str, Any]:
    c = pred.correction
    return {"text_id": note.text_id, "case_id": note.text_id, "flag": c.flag, "sentence_id": c.sentence_id,
            "corrected": c.corrected, "line": c.line(), "outcome": pred.outcome, "react_steps": pred.react_steps,
            "searches": pred.searches, "reflexion_turns": pred.reflexion_turns, "review_scores": pred.review_scores,
            "parse_failures": pred.parse_failures, "lm_calls": pred.lm_calls, "usage": pred.usage,
            "seconds": round(pred.seconds, 3), "reflections": pred.reflections}


def metrics_config(cfg: DictConfig) -> CorrMetricsConfig:
    return CorrMetricsConfig(bertscore=bertscore_config(cfg), bleurt_checkpoint=cfg.metrics.get("bleurt_checkpoint"))


def _score(cfg: DictConfig, notes: list[Note], predictions: dict[str, Correction]) -> dict[str, Any]:
    """Score, name the BERTScore model, write scores.json into the run folder and print."""
    scores = score(notes, predictions, metrics_config(cfg))
    scores["bertscore_model"] = cfg.metrics.bertscore.model_type if cfg.metrics.get("bertscore") else None
    scores["objective"] = scores["AggregateC"]
    write_json(output_dir() / "scores.json", scores)
    _print(scores)
    return scores


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = max(len(records), 1)
    mean = lambda key: sum(r[key] for r in records) / n  # noqa: E731
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    # Every LM request the loop makes (cache hits included): steps + reviews + reflexions + the final parse.
    requests = [r["react_steps"] + sum(len(s) for s in r["review_scores"]) + r["reflexion_turns"]
                + (r["outcome"] == "accepted") for r in records]
    return {"notes": len(records), "lm_requests_per_note": sum(requests) / n,
            "lm_calls_per_note": mean("lm_calls"), "react_steps_per_note": mean("react_steps"),
            "searches_per_note": mean("searches"), "reflexion_turns_per_note": mean("reflexion_turns"),
            "seconds_per_note": mean("seconds"), "parse_failures": sum(r["parse_failures"] for r in records),
            "outcomes": outcomes,
            "note": "lm_requests counts every request of the loop; lm_calls only those that reached the model "
                    "(DSPy cache hits are not calls)"}


def _print(scores: dict[str, Any]) -> None:
    keys = ("error_flag_accuracy", "error_sentence_accuracy", "R1FC", "R2FC", "RLFC", "BERTC", "BLEURTC", "AggregateC")
    print(", ".join(f"{k}={scores[k]:.4f}" if scores.get(k) is not None else f"{k}=unavailable" for k in keys))
    for name, reason in (scores.get("unavailable") or {}).items():
        print(f"  {name}: {reason}")


def run(cfg: DictConfig) -> float | None:
    notes = load_notes(cfg.data.path, cfg.data.get("limit"))
    out = output_dir()
    configure_dspy(cfg)
    role_lms = build_role_lms(cfg.lm, list(ROLES))
    program = build_program(cfg, role_lms, build_search(cfg))
    done = run_resumable(notes, lambda n: n.text_id, lambda n: record(program(note=n), n),
                         PredictionLog(out / "predictions.jsonl"), num_threads=int(cfg.lm.get("num_threads", 1)),
                         progress=cfg.progress, unit="note")
    records = list(done.values())
    corrections = [Correction(r["text_id"], r["flag"], r["sentence_id"], r["corrected"]) for r in records]
    write_submission(corrections, out / "submission.txt")
    summary = summarize(records)
    write_json(out / "usage.json", summary)
    write_json(out / "config.json", OmegaConf.to_container(cfg, resolve=True))
    scores = None
    if all(n.has_labels for n in notes):
        scores = _score(cfg, notes, {c.text_id: c for c in corrections})
    print(f"{summary['notes']} notes: {summary['lm_calls_per_note']:.1f} LM calls, {summary['react_steps_per_note']:.1f} "
          f"ReAct steps, {summary['seconds_per_note']:.1f} s per note; outputs: {out}")
    return scores["AggregateC"] if scores else None


def evaluate(cfg: DictConfig) -> float | None:
    """task=evaluate: score `data.predictions` (a submission file) against `data.path`, or run then score."""
    if not cfg.data.get("predictions"):
        return run(cfg)
    notes = load_notes(cfg.data.path, cfg.data.get("limit"))
    start = time.perf_counter()
    scores = _score(cfg, notes, read_submission(Path(cfg.data.predictions)))
    log.info("scored %d notes in %.1f s", len(notes), time.perf_counter() - start)
    return scores["AggregateC"]


def compile(cfg: DictConfig) -> float | None:  # noqa: A001 - the task's name
    """task=compile: optimize on data.train (the 100-note training sample), score data.val before/after, save."""
    import dspy

    from runners.compile import compile_program

    configure_dspy(cfg)
    dspy.configure(lm=build_role_lms(cfg.lm, ["agent"])["agent"])  # one LM for every role while compiling
    train = load_notes(cfg.data.train, cfg.data.get("train_limit"))
    val = load_notes(cfg.data.val, cfg.data.get("val_limit"))
    trainset = [dspy.Example(note=n).with_inputs("note") for n in train]
    valset = [dspy.Example(note=n).with_inputs("note") for n in val]
    return compile_program(cfg, build_program(cfg, None, build_search(cfg)), trainset, valset)
