"""The program contract: what each program declares once, so one runner skeleton (runners/program.py) serves every
program. `conf/program/<name>.yaml` names the `module` (the dspy.Module) and the `contract`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import dspy
from omegaconf import DictConfig

from common.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel

Item = TypeVar("Item")


class Inputs(Generic[Item]):
    """Validated inputs of one run: the items and whatever references score them (None: score nothing)."""

    def __init__(self, items: Sequence[Item], references: Any = None, files: dict[str, str] | None = None) -> None:
        self.items = list(items)
        self.references = references
        self.files = dict(files or {})  # name -> path of every file the predictions depend on (fingerprinted)


class ProgramContract(ABC, Generic[Item]):
    """One program's loader, builder, record format, writers, scorer, objective, optimizer metrics and report."""

    name: str = ""
    unit: str = "item"             # what one prediction is about: "case", "note"
    roles: tuple[str, ...] = ()    # LM roles (an LM per role, STORM-style)

    # --- inputs -------------------------------------------------------------------------------------------------
    @abstractmethod
    def load(self, cfg: DictConfig, split: str = "run") -> Inputs[Item]:
        """Load and validate the inputs of `split` (run | train | val) and their references, before any LM call."""

    @abstractmethod
    def item_id(self, item: Item) -> str: ...

    def record_id(self, record: dict[str, Any]) -> str:
        return str(record["id"])

    # the fields every saved record holds: the submission writers, scorers and reports read them
    record_fields: tuple[str, ...] = ()

    def record_problem(self, record: dict[str, Any]) -> str | None:
        """Why a saved record (a hand-edited or foreign line) cannot make this program's outputs, or None."""
        missing = [name for name in self.record_fields if name not in record]
        return f"lacks {', '.join(missing)}" if missing else None

    def subset(self, inputs: Inputs[Item], ids: set[str]) -> Inputs[Item]:
        """The items whose ids are in `ids`, in input order (data.shard runs one slice); a program whose references
        list every item overrides this to cut them too."""
        return Inputs([i for i in inputs.items if self.item_id(i) in ids], references=inputs.references,
                      files=inputs.files)

    # --- the program --------------------------------------------------------------------------------------------
    def lm_roles(self, cfg: DictConfig) -> list[str]:
        """The roles that call an LM under this config (a program with no LM stage needs none)."""
        return list(self.roles)

    @abstractmethod
    def build(self, cfg: DictConfig, role_lms: dict[str, dspy.LM] | None, **resources: Any) -> dspy.Module:
        """Instantiate `cfg.program.module` with the shared runtime resources (LMs, embedder, search tool);
        `resources` the caller gives (a loaded embedder, a test's search function) are used as they are."""

    @abstractmethod
    def predict(self, program: dspy.Module, item: Item) -> dict[str, Any]:
        """Run the program on one item and return its JSON-serialisable record (with `id` and `seconds`)."""

    # --- outputs ------------------------------------------------------------------------------------------------
    @abstractmethod
    def write_submission(self, records: list[dict[str, Any]], out: Path) -> list[Path]: ...

    @abstractmethod
    def score(self, cfg: DictConfig, inputs: Inputs[Item], records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Official-equivalent scores of the records, or None when the inputs carry no references."""

    @abstractmethod
    def score_files(self, cfg: DictConfig, inputs: Inputs[Item], path: str) -> dict[str, Any]:
        """task=evaluate: score official submission file(s) at `path` (a file or a folder)."""

    def objective(self, scores: dict[str, Any] | None) -> float | None:
        """What sweeps and compile runs maximize."""
        return None if not scores else scores.get("objective")

    def print_scores(self, scores: dict[str, Any]) -> None:
        print(", ".join(f"{k}={v:.4f}" for k, v in scores.items() if isinstance(v, float)))

    @abstractmethod
    def usage(self, records: list[dict[str, Any]]) -> dict[str, Any]: ...

    @abstractmethod
    def report(self, cfg: DictConfig, usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        """report.md"""

    def report_html(self, cfg: DictConfig, inputs: Inputs[Item], records: list[dict[str, Any]],
                    usage: dict[str, Any], scores: dict[str, Any] | None) -> str:
        """report.html: a self-contained page a person reads (the default lists the records)."""
        from common.html import esc, json_block, page

        return page(f"clinprog {self.name} run", f"<h1>clinprog run: {esc(self.name)}</h1><h2>Scores</h2>"
                    f"{json_block(scores)}<h2>Usage</h2>{json_block(usage)}<h2>Records</h2>{json_block(records)}")

    def write_readable(self, cfg: DictConfig, inputs: Inputs[Item], records: list[dict[str, Any]],
                       out: Path) -> list[Path]:
        """Files a person reads beside the official ones (answers.md); the default writes none."""
        return []

    def fingerprint_extra(self, cfg: DictConfig) -> dict[str, Any]:
        """Besides the program config, LM and input files: anything else the predictions depend on."""
        return {}

    def stage_choices(self, cfg: DictConfig) -> dict[str, str]:
        """{stage: the option the run chose} (`/health`, the run's LM line); {}: no swappable stages."""
        return {}

    # --- compiling ----------------------------------------------------------------------------------------------
    objectives: dict[str, Callable[..., float]] = {}

    def examples(self, cfg: DictConfig, split: str) -> list[dspy.Example]:
        raise NotImplementedError(f"program={self.name} cannot be compiled")

    def feedback(self, gold: dspy.Example, pred: Any, value: float) -> str:
        """Textual feedback for reflective optimizers (GEPA)."""
        return f"score {value:.3f} (1.0 is a perfect match)"

    # --- serving (task=serve) -----------------------------------------------------------------------------------
    # `POST /v1/<name>/<serve_verb>` serves one item; serving/app.py builds the route from these declarations
    serve_verb: str = ""
    serve_aliases: tuple[str, ...] = ()   # further paths of the same endpoint (URLs kept from earlier releases)

    def serve_path(self) -> str:
        return f"/v1/{self.name}/{self.serve_verb}"

    def serve_schemas(self) -> tuple[type[BaseModel], type[BaseModel]]:
        """The request and response bodies (pydantic models)."""
        raise ConfigError(f"program={self.name} cannot be served: its contract declares no serve_schemas() "
                          "(request and response models)")

    def serve_item(self, request: BaseModel) -> Item:
        """The input item a validated request stands for; a ClinprogError here is a 422 with its message."""
        raise ConfigError(f"program={self.name} cannot be served: its contract declares no serve_item()")

    def serve_sentences(self, item: Item) -> int:
        """How many sentences the item holds (`serve.max_sentences` refuses more)."""
        return len(getattr(item, "sentences", ()))

    def serve_response(self, record: dict[str, Any], lm_failure: str | None, seconds: float) -> dict[str, Any]:
        """The response body of a record (`lm_failure`: what failed, when the fallback answered)."""
        raise ConfigError(f"program={self.name} cannot be served: its contract declares no serve_response()")

    def serve_page(self) -> tuple[str, str] | None:
        """The program's form on the page at `/` (serving/page.py): its HTML and a script defining `programBody()`
        and `programRender(data)`; None: the page points to the JSON API."""
        return None

    def serve_echo(self, item: Item) -> dict[str, Any]:
        """Fields of the item the response repeats as the program read it (the note's numbered sentences)."""
        return {}

    def serve_lm_failure(self, item: Item, failure: str) -> dict[str, Any] | None:
        """The record answered when the LM fails and the program has no no-LM program; None: a 502 naming the failure."""
        return None

    def serve_health(self, cfg: DictConfig) -> dict[str, Any]:
        """What `GET /health` adds about this program."""
        return {"index": None}


def contract_for(cfg: DictConfig) -> ProgramContract:
    """The program's contract, from `program.contract._target_`."""
    from hydra.utils import instantiate

    node = cfg.program.get("contract")
    if not node:
        raise ConfigError(f"program={cfg.program.get('name')} declares no program.contract._target_")
    return instantiate(node)
