"""`program=mediqa_corr`: what MedReAct'N'MedReFlex declares for the shared runner skeleton."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import dspy
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel

from common.contract import Inputs, ProgramContract
from common.errors import ClinprogError
from common.note_text import split_note
from common.outputs import write_text
from common.plain_rows import plain_fingerprint
from common.report_text import counts
from common.resources import Resources, instantiate_node
from common.submission_coverage import coverage, coverage_problem, foreign
from common.usage import repairs_summary
from lms.describe import lm_model
from programs.mediqa_corr import objectives as objectives_module
from programs.mediqa_corr.pipeline import ROLES
from tasks.mediqa_corr.data import MediqaDataError, Note, load_notes, text_id_problem
from tasks.mediqa_corr.notes_csv import notes_csv
from tasks.mediqa_corr.plain_notes import is_plain_notes, load_plain_notes
from tasks.mediqa_corr.scoring import CorrMetricsConfig, score
from tasks.mediqa_corr.submission import Correction, parse_line, read_submission, write_submission
from tasks.text_metrics import bertscore_config

SPLITS = {"run": ("path", "limit"), "train": ("train", "train_limit"), "val": ("val", "val_limit")}
# what the official script does with ids a submission lacks or adds
MISSING_RULE = {False: "scored as wrong, as the official script does; data.score_only_submitted=true scores only the "
                       "submitted notes, data.limit=N the first N",
                True: "not scored (data.score_only_submitted=true)"}
EXTRA_RULE = "extra ids not in the notes, ignored"
SCORE_KEYS = ("error_flag_accuracy", "error_sentence_accuracy", "R1FC", "R2FC", "RLFC", "BERTC", "BLEURTC", "AggregateC")


def build_search(cfg: DictConfig):
    """The agent's search tool over the configured index; None when search is off."""
    if not cfg.program.search.enabled:
        return None
    from retrieval.factory import build_retriever
    from retrieval.passage import RetrievalError

    retriever = build_retriever(cfg)
    try:
        retriever.check()  # a missing index or another embedder fails here, before any note
    except RetrievalError as exc:
        raise RetrievalError(f"{exc}; or run the agent without its search tool: program.search.enabled=false") from None
    return retriever.as_tool(max_chars=int(cfg.program.search.max_chars),
                             max_passages=int(cfg.program.search.max_passages))


def degenerate_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Notes where a role said nothing usable: every agent step unparsable, every review of a proposal unparsable
    (scored 1 by rule), a panel giving every criterion the same score, or a correction that repeats its sentence
    (`unchanged`, never submitted); older records (text episodes) count none."""

    def dicts(value: Any) -> list[dict[str, Any]]:
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    out = {"agent": 0, "evaluator": 0, "evaluator_all_same": 0, "unchanged": 0}
    for r in records:
        episodes = dicts(r.get("episodes"))
        steps = [s for e in episodes for s in dicts(e.get("steps"))]
        out["agent"] += bool(steps) and not any(s.get("parsed") for s in steps)
        for e in episodes:
            out["unchanged"] += e.get("unchanged") is True
            reviews = dicts(e.get("reviews"))
            if reviews and all(rv.get("score") is None for rv in reviews):
                out["evaluator"] += 1
            elif len(reviews) >= 3 and len({rv.get("score") for rv in reviews}) == 1:
                out["evaluator_all_same"] += 1
    return {k: v for k, v in out.items() if v}


class MediqaCorrContract(ProgramContract[Note]):
    name = "mediqa_corr"
    unit = "note"
    roles = ROLES
    objectives = objectives_module.OBJECTIVES

    def load(self, cfg: DictConfig, split: str = "run") -> Inputs[Note]:
        path_field, limit_field = SPLITS[split]
        path = cfg.data[path_field]
        if is_plain_notes(path):  # notes.jsonl | notes.csv | a folder of .txt: free text, numbered here
            plain = load_plain_notes(path, cfg.data.get("plain") or {}, cfg.data.get(limit_field))
            return Inputs(plain.notes, references={"labelled": False, "cut": plain.cut}, files=plain.files)
        notes = load_notes(path, cfg.data.get(limit_field))
        labelled = all(n.has_labels for n in notes)
        return Inputs(notes, references={"labelled": labelled}, files={"notes": str(path)})

    def item_id(self, item: Note) -> str:
        return item.text_id

    def record_id(self, record: dict[str, Any]) -> str:
        return str(record["text_id"])

    def build(self, cfg: DictConfig, role_lms: dict[str, dspy.LM] | None, **resources: Any) -> dspy.Module:
        search = resources["search"] if "search" in resources else build_search(cfg)
        shared = Resources(role_lms=dict(role_lms or {}), search=search)
        program = shared.complete(instantiate_node(cfg.program.get("module"), "program.module"), "program.module")
        from common.program_state import load_program_state

        return load_program_state(program, cfg)

    def fingerprint_extra(self, cfg: DictConfig) -> dict[str, Any]:
        plain = {"plain": plain_fingerprint(cfg.data.get("plain") or {})} if is_plain_notes(cfg.data.path) else {}
        if not cfg.program.search.enabled:
            return plain
        return {**plain, "retrieval": {"retriever": OmegaConf.to_container(cfg.retriever, resolve=True),
                              "embedder": OmegaConf.to_container(cfg.embedder, resolve=True),
                              "reranker": OmegaConf.to_container(cfg.reranker, resolve=True)}}

    record_fields = ("text_id", "flag", "sentence_id", "corrected")   # what corrections() reads

    def record_problem(self, record: dict[str, Any]) -> str | None:
        """Also the kinds corrections() needs: a line the official scorer reads (an edited `"flag": "1"` would be
        refused halfway through the outputs)."""
        problem = super().record_problem(record)
        if problem:
            return problem
        whole = {k: isinstance(record[k], int) and not isinstance(record[k], bool) for k in ("flag", "sentence_id")}
        wrong = [*(["flag is not 0 or 1"] if not whole["flag"] or record["flag"] not in (0, 1) else []),
                 *(["sentence_id is not an integer"] if not whole["sentence_id"] else []),
                 *(["corrected is not a string"] if record["flag"] == 1 and not isinstance(record["corrected"], str)
                   else []),
                 *([f"text_id: {why}"] if (why := text_id_problem(str(record["text_id"]))) else [])]
        return ", ".join(wrong) or None

    def predict(self, program: dspy.Module, item: Note) -> dict[str, Any]:
        pred = program(note=item)
        c = pred.correction
        return {"text_id": item.text_id, "flag": c.flag, "sentence_id": c.sentence_id, "corrected": c.corrected,
                "line": c.line(), "outcome": pred.outcome, "react_steps": pred.react_steps,
                "searches": pred.searches, "reflexion_turns": pred.reflexion_turns,
                "review_scores": pred.review_scores, "parse_failures": pred.parse_failures,
                "lm_calls": pred.lm_calls, "usage": pred.usage, "seconds": round(pred.seconds, 3),
                "reflections": pred.reflections, "repairs": pred.repairs,
                "episodes": pred.episodes}  # the agent trace, long texts capped at pipeline.TEXT_CAP

    @staticmethod
    def corrections(records: list[dict[str, Any]]) -> list[Correction]:
        return [Correction(r["text_id"], r["flag"], r["sentence_id"], r["corrected"]) for r in records]

    def write_submission(self, records: list[dict[str, Any]], out: Path) -> list[Path]:
        return [write_submission(self.corrections(records), out / "submission.txt")]

    def write_readable(self, cfg: DictConfig, inputs: Inputs[Note], records: list[dict[str, Any]],
                       out: Path) -> list[Path]:
        """answers.md; a run of plain notes also writes the numbered notes it used (numbered_notes.csv)."""
        from programs.mediqa_corr.answers_md import render

        cut = inputs.references.get("cut")
        written = [out / "answers.md"]
        write_text(written[0], render(str(cfg.data.path), inputs.items, records, cut or {}))
        if cut is not None:
            written.append(out / "numbered_notes.csv")
            write_text(written[1], notes_csv(inputs.items))
        return written

    def _score(self, cfg: DictConfig, notes: list[Note], predictions: dict[str, Correction]) -> dict[str, Any]:
        scores = score(notes, predictions, CorrMetricsConfig(bertscore=bertscore_config(cfg.metrics.get("bertscore")),
                                                             bleurt_checkpoint=cfg.metrics.get("bleurt_checkpoint")))
        scores["bertscore_model"] = cfg.metrics.bertscore.model_type if cfg.metrics.get("bertscore") else None
        scores["objective"] = scores["AggregateC"]
        return scores

    def score(self, cfg: DictConfig, inputs: Inputs[Note], records: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not inputs.references["labelled"]:
            return None
        # scored as the official scorer reads back the submission lines we write
        parsed = [parse_line(c.line()) for c in self.corrections(records)]
        return self._score(cfg, inputs.items, {c.text_id: c for c in parsed if c is not None})

    def score_files(self, cfg: DictConfig, inputs: Inputs[Note], path: str) -> dict[str, Any]:
        invalid: list[str] = []
        submitted = read_submission(Path(path), invalid)
        notes = inputs.items
        only_submitted = bool(cfg.data.get("score_only_submitted"))
        cov = coverage([n.text_id for n in notes], list(submitted), only_submitted)
        error = foreign(cov, path, "text", "notes", cfg.data.path, next(iter(submitted), ""), notes[0].text_id)
        if error:
            raise MediqaDataError(error)
        if only_submitted:
            notes = [n for n in notes if n.text_id in submitted]
        scores = self._score(cfg, notes, submitted)
        scores["invalid_lines"] = invalid  # skipped, as the official script does ("Invalid line")
        scores["coverage"] = {**cov, "scored": len(notes)}
        return scores

    def print_scores(self, scores: dict[str, Any]) -> None:
        cov = scores.get("coverage")
        line = coverage_problem(cov, "reference notes", MISSING_RULE[cov["only_submitted"]], EXTRA_RULE) if cov else None
        if line:
            print(line)
        print(", ".join(f"{k}={scores[k]:.4f}" if scores.get(k) is not None else f"{k}=unavailable"
                        for k in SCORE_KEYS))
        for name, reason in (scores.get("unavailable") or {}).items():
            print(f"  {name}: {reason}")
        for note in scores.get("notes") or []:  # where clinprog and the official script part (tasks/mediqa_corr)
            print(f"  note: {note}")
        if scores.get("invalid_lines"):
            print(f"  skipped {len(scores['invalid_lines'])} lines that fail the official line pattern (as the official "
                  f"script does), first: {scores['invalid_lines'][0]}")

    def usage(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        n = max(len(records), 1)
        mean = lambda key: sum(r[key] for r in records) / n  # noqa: E731
        outcomes = dict(Counter(r["outcome"] for r in records))
        # every LM request of the loop (cache hits included): steps + reviews + reflexions + a parse per acceptance
        requests = [r["react_steps"] + sum(len(s) for s in r["review_scores"]) + r["reflexion_turns"]
                    + sum(isinstance(e, dict) and e.get("accepted") is True for e in r.get("episodes") or [])
                    for r in records]
        stages: dict[str, dict[str, float]] = {}
        for r in records:
            for role, u in (r.get("usage") or {}).items():
                agg = stages.setdefault(role, {"seconds": 0.0, "lm_calls": 0, "input_tokens": 0, "output_tokens": 0})
                for k in agg:
                    agg[k] += u.get(k, 0) if isinstance(u.get(k, 0), int | float) else 0
        steps = sum(r["react_steps"] for r in records)
        agent = stages.get("agent", {})
        return {"notes": len(records), "lm_requests_per_note": sum(requests) / n, "stages": stages,
                "input_tokens_per_note": sum(s["input_tokens"] for s in stages.values()) / n,
                "seconds_per_agent_step": agent.get("seconds", 0.0) / steps if steps else None,
                "input_tokens_per_agent_step": agent.get("input_tokens", 0) / steps if steps else None,
                "fallbacks": {"no_accepted_answer": outcomes.get("no_error_after_max_episodes", 0)},
                "degenerate": degenerate_counts(records),
                "lm_calls_per_note": mean("lm_calls"), "react_steps_per_note": mean("react_steps"),
                "searches_per_note": mean("searches"), "reflexion_turns_per_note": mean("reflexion_turns"),
                "seconds_per_note": mean("seconds"), "parse_failures": sum(r["parse_failures"] for r in records),
                "retries": sum(u.get("retries", 0) for r in records for u in (r.get("usage") or {}).values()),
                "repairs": repairs_summary(records),
                "outcomes": outcomes,
                "note": "lm_requests counts every request of the loop; lm_calls only those that reached the model "
                        "(DSPy cache hits are not calls)"}

    def report(self, cfg: DictConfig, usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        roles = ", ".join(f"{role}=lm ({lm_model(cfg, role)})" for role in ROLES)
        search = f"on ({cfg.get('index_dir')})" if (cfg.program.get("search") or {}).get("enabled") else "off"
        lines = ["# clinprog run: program=mediqa_corr", "", f"- roles: {roles}",
                 f"- input: {cfg.data.path}" + (f" (data.limit={cfg.data.limit})" if cfg.data.get("limit") else ""),
                 f"- search: {search}; MedEval accepts at mean >= {cfg.program.eval.avg_threshold} and lowest >= "
                 f"{cfg.program.eval.min_threshold}",
                 f"- notes: {usage['notes']}", f"- LM requests per note: {usage['lm_requests_per_note']:.2f}",
                 f"- ReAct steps per note: {usage['react_steps_per_note']:.2f}",
                 f"- searches per note: {usage['searches_per_note']:.2f}",
                 f"- reflexion turns per note: {usage['reflexion_turns_per_note']:.2f}",
                 f"- seconds per note: {usage['seconds_per_note']:.2f}", f"- outcomes: {counts(usage['outcomes'])}",
                 f"- fallbacks: {counts(usage.get('fallbacks'))}; degenerate outputs: {counts(usage.get('degenerate'))}",
                 f"- markup stripped from LM outputs (repairs): {counts((usage.get('repairs') or {}).get('stages'))}"]
        if scores:
            lines += ["", "## Scores", ""] + [f"- {k}: {scores[k]:.4f}" if scores.get(k) is not None
                                             else f"- {k}: unavailable" for k in SCORE_KEYS]
        return "\n".join(lines) + "\n"

    def report_html(self, cfg: DictConfig, inputs: Inputs[Note], records: list[dict[str, Any]],
                    usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        from programs.mediqa_corr.report_html import render

        return render(cfg, inputs.items, records, usage, scores)

    def examples(self, cfg: DictConfig, split: str) -> list[dspy.Example]:
        return [dspy.Example(note=n).with_inputs("note") for n in self.load(cfg, split).items]

    def feedback(self, gold: dspy.Example, pred: Any, value: float) -> str:
        return objectives_module.describe_mediqa(gold, pred, value)

    # --- serving (task=serve) -----------------------------------------------------------------------------------
    serve_verb = "correct"

    def serve_schemas(self) -> tuple[type[BaseModel], type[BaseModel]]:
        from programs.mediqa_corr.serve_schemas import MediqaRequest, MediqaResponse

        return MediqaRequest, MediqaResponse

    def serve_item(self, request: BaseModel) -> Note:
        pairs = [(x.id, x.text) for x in request.sentences]
        if request.note is not None:
            pairs = [(str(n), t) for n, t in enumerate(split_note(request.note))]
        if not pairs:
            raise ClinprogError("note: no sentence in the note text")
        return Note(request.text_id, " ".join(t for _, t in pairs), tuple(pairs))

    def serve_page(self) -> tuple[str, str]:
        from programs.mediqa_corr.serve_page import FORM, SCRIPT

        return FORM, SCRIPT

    def serve_echo(self, item: Note) -> dict[str, Any]:
        return {"sentences": [{"id": i, "text": t} for i, t in item.sentences]}

    def serve_lm_failure(self, item: Note, failure: str) -> dict[str, Any]:
        """No LM, no review: the documented answer is "no error" (the line the official scorer reads as flag 0)."""
        return {"text_id": item.text_id, "flag": 0, "sentence_id": -1, "corrected": "NA",
                "line": f"{item.text_id} 0 -1 NA", "outcome": "lm_failure", "episodes": [], "usage": {}}

    def serve_response(self, record: dict[str, Any], lm_failure: str | None, seconds: float) -> dict[str, Any]:
        return {"text_id": record["text_id"], "flag": record["flag"], "sentence_id": record["sentence_id"],
                "correction": record["corrected"], "line": record["line"], "outcome": record["outcome"],
                "lm_failure": lm_failure, "episodes": record["episodes"], "usage": record["usage"], "seconds": seconds}

    def serve_health(self, cfg: DictConfig) -> dict[str, Any]:
        return {"index": "search on" if cfg.program.search.enabled else "search off"}
