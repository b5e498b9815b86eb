"""What the toy program declares for the generic runners (run, evaluate, compile, serve, report)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dspy
from hydra.utils import instantiate
from omegaconf import DictConfig
from pydantic import BaseModel, Field

from common.contract import Inputs, ProgramContract
from common.resources import Resources
from tests.toy_program.task import FeverDataError, FeverNote, accuracy, load_notes, read_submission, write_submission


class FeverRequest(BaseModel):
    note_id: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1, max_length=10_000)


class FeverResponse(BaseModel):
    note_id: str
    fever: str
    lm_failure: str | None = None
    seconds: float


def fever_accuracy(example: dspy.Example, pred: Any, trace: Any = None) -> float:
    return float(pred.fever == example.fever)


class FeverContract(ProgramContract[FeverNote]):
    name = "fever"
    unit = "note"
    roles = ("tagger",)
    objectives = {"fever_accuracy": fever_accuracy}
    serve_verb = "tag"

    def load(self, cfg: DictConfig, split: str = "run") -> Inputs[FeverNote]:
        path = cfg.data.notes if split == "run" else cfg.data[split]
        notes = load_notes(path)
        return Inputs(notes, references={"labelled": all(n.label for n in notes)}, files={"notes": str(path)})

    def item_id(self, item: FeverNote) -> str:
        return item.note_id

    def build(self, cfg: DictConfig, role_lms: dict[str, dspy.LM] | None, **resources: Any) -> dspy.Module:
        program = Resources(role_lms=dict(role_lms or {})).complete(instantiate(cfg.program.module), "program.module")
        from common.program_state import load_program_state

        return load_program_state(program, cfg)

    def predict(self, program: dspy.Module, item: FeverNote) -> dict[str, Any]:
        start = time.perf_counter()
        pred = program(note=item.text)
        return {"id": item.note_id, "fever": pred.fever, "fallback": pred.fallback,
                "seconds": round(time.perf_counter() - start, 4)}

    def write_submission(self, records: list[dict[str, Any]], out: Path) -> list[Path]:
        return [write_submission({r["id"]: r["fever"] for r in records}, out / "submission.tsv")]

    def score(self, cfg: DictConfig, inputs: Inputs[FeverNote], records: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not inputs.references["labelled"]:
            return None
        value = accuracy({r["id"]: r["fever"] for r in records}, inputs.items)
        return {"accuracy": value, "objective": value}

    def score_files(self, cfg: DictConfig, inputs: Inputs[FeverNote], path: str) -> dict[str, Any]:
        if not Path(path).is_file():
            raise FeverDataError(f"data.submissions={path}: no such file")
        value = accuracy(read_submission(path), inputs.items)
        return {"accuracy": value, "objective": value}

    def usage(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        return {"notes": len(records), "fallbacks": sum(1 for r in records if r.get("fallback"))}

    def report(self, cfg: DictConfig, usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        return f"# clinprog run: program=fever\n\n- notes: {usage['notes']}\n- scores: {scores}\n"

    def examples(self, cfg: DictConfig, split: str) -> list[dspy.Example]:
        return [dspy.Example(note=n.text, fever=n.label).with_inputs("note") for n in self.load(cfg, split).items]

    # --- serving ------------------------------------------------------------------------------------------------
    def serve_schemas(self) -> tuple[type[BaseModel], type[BaseModel]]:
        return FeverRequest, FeverResponse

    def serve_item(self, request: BaseModel) -> FeverNote:
        return FeverNote(request.note_id, request.text)

    def serve_response(self, record: dict[str, Any], lm_failure: str | None, seconds: float) -> dict[str, Any]:
        return {"note_id": record["id"], "fever": record["fever"], "lm_failure": lm_failure, "seconds": seconds}
