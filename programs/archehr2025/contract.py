"""`program=archehr2025`: the ArchEHR contract with the 2025 submission file, scorer and optimizer metric."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dspy
from omegaconf import DictConfig

from common.contract import Inputs
from programs.archehr.contract import ArchEHRContract
from programs.archehr.report import report_markdown
from tasks.archehr.data import Case
from tasks.archehr.scoring import SubmissionError
from tasks.archehr2025.scoring import factuality, score
from tasks.archehr2025.submission import parse_answer, read_submission, write_submission


def archehr2025_case_metric(example: dspy.Example, pred: Any, trace: Any = None) -> float:
    """One case: strict citation F1 of the cited answer (the official factuality, 0-1)."""
    key = example.key
    if key is None or pred.get("answer") is None:
        return 0.0
    cited = parse_answer(pred.answer).citations
    return factuality([(key.case_id, cited)], {key.case_id: key})["strict_micro_f1"] / 100


class ArchEHR2025Contract(ArchEHRContract):
    name = "archehr2025"
    objectives = {"archehr2025_case": archehr2025_case_metric}

    def predict(self, program: dspy.Module, item: Case) -> dict[str, Any]:
        record = super().predict(program, item)
        pred_answer = record["answer"]
        record["citations"] = sorted(parse_answer(pred_answer).citations) if pred_answer else []
        return record

    def write_submission(self, records: list[dict[str, Any]], out: Path) -> list[Path]:
        return [write_submission(records, out)]

    def _scores(self, cfg: DictConfig, inputs: Inputs[Case], submission: list[tuple[str, str]]) -> dict[str, Any] | None:
        key = inputs.references["key"]
        if key is None:
            return None
        try:
            values = score(submission, key, inputs.items, self._metrics_config(cfg),
                           official_sentence_lookup=bool(cfg.data.get("official_sentence_lookup")))
        except SubmissionError as exc:
            return {"invalid": str(exc), "objective": None}
        values["key"] = inputs.references.get("key_path")
        values["objective"] = values["overall_score"]
        return values

    def score(self, cfg: DictConfig, inputs: Inputs[Case], records: list[dict[str, Any]]) -> dict[str, Any] | None:
        return self._scores(cfg, inputs, [(r["case_id"], r["answer"]) for r in records if r.get("answer") is not None])

    def score_files(self, cfg: DictConfig, inputs: Inputs[Case], path: str) -> dict[str, Any] | None:
        return self._scores(cfg, inputs, read_submission(path))

    def print_scores(self, scores: dict[str, Any]) -> None:
        if "invalid" in scores:
            hint = ("; data.limit=N scores the first N cases" if "not in submission" in str(scores["invalid"]) else "")
            print(f"invalid submission, not scored: {scores['invalid']}{hint}")
            return
        keys = ("strict_micro_precision", "strict_micro_recall", "strict_micro_f1", "lenient_micro_f1",
                "overall_factuality_score", "bleu", "rougeLsum", "sari", "bertscore", "alignscore", "medcon",
                "overall_relevance_score", "overall_score")
        print(", ".join(f"{k}={scores[k]:.2f}" if scores.get(k) is not None else f"{k}=n/a" for k in keys))
        if scores.get("overall_relevance_missing"):
            print(f"  unavailable here: {', '.join(scores['overall_relevance_missing'])} (relevance averages the rest)")
        for note in scores.get("notes") or []:
            print(f"  note: {note}")

    def report(self, cfg: DictConfig, usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        text = report_markdown(cfg, usage, None, scored_below=True)
        if scores and "invalid" not in scores:
            text += "\n## Scores (official 2025 leaderboard scale, 0-100)\n\n" + "\n".join(
                f"- {k}: {scores[k]:.2f}" for k in ("overall_factuality_score", "overall_relevance_score",
                                                     "overall_score") if scores.get(k) is not None) + "\n"
        elif scores:
            text += f"\n## Scores\n\ninvalid submission: {scores['invalid']}\n"
        return text

    def feedback(self, gold: dspy.Example, pred: Any, value: float) -> str:
        key = gold.key
        cited = sorted(parse_answer(pred.answer or "").citations)
        return (f"strict citation F1 {value:.3f}; essential sentence ids: {sorted(key.essential)}; "
                f"cited: {cited}")

    # --- serving (task=serve) -----------------------------------------------------------------------------------
    serve_aliases = ("/v1/archehr/answer",)  # where program=archehr2025 was served before /v1/archehr2025/answer
