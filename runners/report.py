"""`task=report dir=RUN`: rebuild report.html (and report.md, answers.md) of a finished run from its files, without rerunning."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from common.contract import contract_for
from common.errors import ClinprogError
from common.outputs import write_text
from common.prediction_log import PredictionLog


def report(cfg: DictConfig) -> None:
    if not cfg.get("dir"):
        raise ClinprogError("task=report needs dir=<a run folder>")
    run = Path(cfg.dir)
    config_path = run / "config.json"
    if not config_path.is_file():
        raise ClinprogError(f"{run}: no config.json (not a finished clinprog run folder)")
    saved = OmegaConf.create(json.loads(config_path.read_text(encoding="utf-8")))
    scores = json.loads((run / "scores.json").read_text()) if (run / "scores.json").is_file() else None
    if isinstance(scores, dict) and "key" in scores and "key" in (saved.get("data") or {}) \
            and isinstance(scores["key"], str | None):
        # the key the run was scored with (or none), not one that appeared beside the cases since
        saved.data.key = scores.get("key")
    contract = contract_for(saved)
    inputs = contract.load(saved)
    # every record checked as it is read (contract.record_problem): a hand-edited line is one error, nothing written
    done = PredictionLog(run / "predictions.jsonl", contract.record_id, contract.record_problem).read()
    records = [done[contract.item_id(i)] for i in inputs.items if contract.item_id(i) in done]
    usage = json.loads((run / "usage.json").read_text()) if (run / "usage.json").is_file() else contract.usage(records)
    markdown, html = contract.report(saved, usage, scores), contract.report_html(saved, inputs, records, usage, scores)
    contract.write_readable(saved, inputs, records, run)
    write_text(run / "report.md", markdown)
    write_text(run / "report.html", html)
    print(f"report: {run / 'report.html'} ({len(records)} {contract.unit}s)")
