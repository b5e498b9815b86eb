"""`tracking=mlflow`: log each run / compile / sweep job to MLflow: the resolved config as params, `scores.json` and
`usage.json` as metrics, the run folder's files as artifacts. Sweep jobs of one multirun share a parent run, named in
a file of the sweep folder (created with O_EXCL, so parallel launchers agree)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from common.config_groups import chosen_name
from common.errors import ConfigError
from common.flatten import flatten

log = logging.getLogger(__name__)


def _numbers(path: Path, prefix: str) -> dict[str, float]:
    if not path.is_file():
        return {}
    flat = flatten(json.loads(path.read_text()), prefix)
    return {k.replace("@", "_"): float(v) for k, v in flat.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and v == v}


def _sweep_dir() -> Path | None:
    from hydra.core.hydra_config import HydraConfig

    try:
        hc = HydraConfig.get()
    except ValueError:
        return None
    return Path(hc.sweep.dir) if str(hc.mode) == "RunMode.MULTIRUN" else None


def _parent_run(mlflow: Any, sweep: Path, experiment_id: str) -> str:
    """One parent run per multirun folder; the first job creates it, the others read its id."""
    sweep.mkdir(parents=True, exist_ok=True)
    marker = sweep / ".mlflow_parent_run"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        for _ in range(100):
            run_id = marker.read_text().strip()
            if run_id:
                return run_id
            time.sleep(0.1)
        raise ConfigError(f"{marker}: no parent run id") from None
    client = mlflow.tracking.MlflowClient()
    run = client.create_run(experiment_id, run_name=f"sweep {sweep.name}", tags={"sweep_dir": str(sweep)})
    client.set_terminated(run.info.run_id)
    with os.fdopen(fd, "w") as fh:
        fh.write(run.info.run_id)
    return run.info.run_id


class NoTracking:
    """`tracking=none`: the run folder is the record."""

    @contextlib.contextmanager
    def track(self, cfg: DictConfig, out: Path) -> Iterator[None]:
        yield


class MlflowTracking:
    """`tracking=mlflow` (built from conf/tracking/mlflow.yaml)."""

    def __init__(self, uri: str, artifact_location: str, experiment: str, traces: bool = False) -> None:
        self.uri, self.artifact_location, self.experiment, self.traces = uri, artifact_location, experiment, traces

    @contextlib.contextmanager
    def track(self, cfg: DictConfig, out: Path) -> Iterator[None]:
        try:
            import mlflow
        except ImportError:
            raise ConfigError("tracking=mlflow needs MLflow: pip install -e \".[tracking]\"") from None
        uri, name = str(self.uri), str(self.experiment)
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        mlflow.set_tracking_uri(uri)
        experiment = mlflow.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else mlflow.create_experiment(
            name, artifact_location=str(Path(self.artifact_location).resolve()) if uri.startswith("sqlite") else None)
        sweep = _sweep_dir()
        tags = {"mlflow.parentRunId": _parent_run(mlflow, sweep, experiment_id)} if sweep else {}
        if self.traces:
            try:
                mlflow.dspy.autolog()
            except Exception as exc:  # the skinny package has no DSPy flavour
                log.warning("tracking.traces=true: MLflow's DSPy autologging is unavailable here (%s)", exc)
        task = chosen_name(cfg, "task", cfg.task)
        with mlflow.start_run(experiment_id=experiment_id, run_name=f"{cfg.program.name} {task} {out.name}",
                              tags={**tags, "task": task, "program": str(cfg.program.name)}) as run:
            params = flatten(OmegaConf.to_container(cfg, resolve=True))
            # MLflow names allow only alphanumerics, _ - . space : / (a Hydra choice key may hold an @)
            mlflow.log_params({re.sub(r"[^\w\-. :/]", ":", k): (json.dumps(v) if isinstance(v, list) else str(v))[:500]
                               for k, v in params.items() if not k.startswith("hydra")})
            try:
                yield
            finally:
                metrics = {**_numbers(out / "scores.json", "scores"), **_numbers(out / "usage.json", "usage")}
                if metrics:
                    mlflow.log_metrics(metrics)
                for path in sorted(out.iterdir()) if out.is_dir() else []:
                    if path.is_file() and not path.name.endswith((".tmp", ".lock")):
                        mlflow.log_artifact(str(path))
                print(f"tracking: logged to MLflow run {run.info.run_id} (experiment {name}) at {uri}")


@contextlib.contextmanager
def tracked(cfg: DictConfig, out: Path) -> Iterator[None]:
    """The configured tracker around one task (`cfg.tracking._target_`; no tracking node: none)."""
    node = cfg.get("tracking")
    with (instantiate(node) if node and node.get("_target_") else NoTracking()).track(cfg, out):
        yield
