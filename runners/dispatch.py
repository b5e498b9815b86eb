"""Run the task a composed config names: the whole body of `python main.py ...` once Hydra has composed `cfg`
(tests compose the config and call it)."""

from __future__ import annotations

import shlex
import sys
import traceback
from collections.abc import Callable

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_method
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError

from common.config_groups import with_choices
from common.errors import ClinprogError, import_failure, through_instantiate, wrapped
from common.logs import error_text, quiet_third_party
from common.multirun import job_failed
from common.outputs import in_multirun, output_dir, record_failure
from common.settings import validate
from common.tracking import tracked


def task_function(cfg: DictConfig) -> Callable[[DictConfig], float | None]:
    """The function the `task` group's choice names (conf/task/<name>.yaml `_target_`), called with the whole config."""
    node = cfg.get("task")
    path = node.get("_target_") if hasattr(node, "get") else None
    if not path:
        raise ClinprogError(f"task must be a config with a _target_ (task=run | evaluate | compile | ...), not {node!r}")
    try:
        return get_method(str(path))
    except Exception as exc:  # noqa: BLE001 - a task path edited to something that is not a function
        raise ClinprogError(f"task._target_={path}: not a function clinprog can import ({import_failure(exc)})") from None


def interrupted_line(cfg: DictConfig | None) -> str:
    """What Ctrl-C outside the case loop says: what stopped, what is kept, and the command that goes on."""
    node = cfg.get("task") if cfg is not None else None
    target = str(node.get("_target_") or "") if hasattr(node, "get") else ""
    task = target.rsplit(".", 1)[-1].removesuffix("_task") or "the command"
    said = f"interrupted: task={task} stopped before it finished; "
    if task == "index":
        return said + "the chunks it stored are kept; rerun the same command to go on"
    if task == "compile":
        return said + "a compile's state file is written only at its end, so the last one is unchanged; rerun the " \
                      "same command"
    folder = output_dir() if HydraConfig.initialized() else None
    if folder is not None and (folder / "predictions.jsonl").exists():  # stopped after its cases: resume, not anew
        return said + f"its records are kept; to resume, rerun the same command with {shlex.quote(f'hydra.run.dir={folder}')}"
    return said + "what earlier commands saved is unchanged; rerun the same command"


def dispatch(cfg: DictConfig) -> float | None:
    """Run the chosen task; a `ClinprogError` becomes one `error:` line on stderr (and in the run folder), exit code 2."""
    quiet_third_party(bool(cfg.get("verbose")))
    if HydraConfig.initialized():  # reports and config.json name the options the command line chose
        with_choices(cfg, HydraConfig.get().runtime.choices)
    try:
        validate(cfg)  # every schema'd section (serve.*, executor.*), before any task runs
        task = task_function(cfg)
        with through_instantiate(), tracked(cfg, output_dir()):  # a builder's ConfigError: one line, not Hydra's
            return task(cfg)
    except KeyboardInterrupt:  # outside a run's case loop (which says what it saved): one line, never a traceback
        line = interrupted_line(cfg)
        print(line, file=sys.stderr)
        record_failure(line)
        raise SystemExit(130) from None
    except (ClinprogError, InterpolationResolutionError) as caught:
        exc = wrapped(caught, ClinprogError)
        if exc is None:  # a config value omegaconf cannot resolve (not ours): its own one-line message
            exc = ClinprogError(str(caught).splitlines()[0])
        line = error_text(exc)
        if job_failed(line):  # a multirun job: the next job runs; the sweep's end lists it and exits 2
            return None
        print(line, file=sys.stderr)
        record_failure(line)
        raise SystemExit(2) from None
    except Exception as exc:
        line = error_text(f"unexpected {type(exc).__name__}: {exc}")
        if in_multirun():  # a bug in one multirun job: its traceback now, the other jobs still run (exit 1 at the end)
            traceback.print_exc()
            job_failed(line, unexpected=True)
            return None
        record_failure(line)  # a bug: Hydra prints the traceback; the run folder is still tidied up
        raise
