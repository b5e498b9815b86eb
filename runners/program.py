"""The one run / evaluate / compile skeleton every program shares (driven by its `ProgramContract`): inputs are
checked before any LM call, predictions are resumable, and every output is written from them."""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from common.contract import Inputs, ProgramContract, contract_for
from common.errors import ClinprogError, ConfigError, number_in
from common.files import file_sha256
from common.outputs import append_main_log, output_dir, write_json, write_text
from common.prediction_log import PredictionLog
from common.program_state import fitted_knobs
from common.run_folder import RunFolder
from lms.describe import backend_name
from runners.dspy_setup import build_predictor, built_by_workers, configure_dspy
from runners.executors import executor_for
from runners.executors.resumable import Interrupted, run_resumable
from runners.shards import select_shard

log = logging.getLogger(__name__)
LM_CHOICES = ("lm=gemini (the seed's system), lm=openai_compatible (a local server: vLLM, Ollama, llama.cpp), "
              "lm=embedded (the tiny local model)")


def has_lm(cfg: DictConfig) -> bool:
    return bool(cfg.lm.get("client"))


def lm_identity(cfg: DictConfig) -> dict[str, Any] | None:
    """What about the LM changes predictions (not its cache, threads or retry counts)."""
    if not has_lm(cfg):
        return None
    client = OmegaConf.to_container(cfg.lm.client, resolve=True)
    ignore = {"cache", "num_retries", "check", "api_key_env", "timeout"}
    roles = cfg.lm.get("roles")
    roles = OmegaConf.to_container(roles, resolve=True) if roles else {}
    return {"client": {k: v for k, v in client.items() if k not in ignore}, "adapter": cfg.lm.get("adapter"),
            "roles": roles}


def lm_choice(cfg: DictConfig) -> str:
    """`lm=<option>` as the user chose it (Hydra's choice), else the builder's name."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return f"lm={HydraConfig.get().runtime.choices['lm']}"
    except (ValueError, KeyError):  # outside @hydra.main
        return f"lm={backend_name(cfg.lm.client)}"


def choose_lm_or_no_lm(cfg: DictConfig, contract: ProgramContract) -> list[str]:
    """The LM roles the composed config uses; says in one line when none does, or stops when one is needed and no
    LM is chosen."""
    client = cfg.lm.get("client")
    if client and not client.get("_target_"):  # e.g. +lm.client.model_path=... with lm=none
        from lms import build_lm

        build_lm(cfg.lm)  # raises the one line naming the backends
    roles = contract.lm_roles(cfg)
    if roles and not has_lm(cfg):
        no_lm = getattr(contract, "no_lm_stages", None)
        if no_lm is None:  # a program without non-LLM stages
            raise ConfigError(f"program={contract.name} needs an LM and none is chosen: add {LM_CHOICES}")
        group = getattr(contract, "stage_group", "program")
        raise ConfigError(f"program={contract.name}: {', '.join(roles)} needs an LM and none is chosen: add "
                          f"{LM_CHOICES}; or choose a non-LLM implementation ({group}/<stage>=...)")
    choices = contract.stage_choices(cfg)
    if not roles and has_lm(cfg):
        print(f"{lm_choice(cfg)}: no stage of program={contract.name} uses an LM with these settings "
              f"({', '.join(f'{k}={v}' for k, v in choices.items())}), so none is loaded")
    elif not roles and choices:
        print(f"no LM chosen: program={contract.name} runs every stage without an LM "
              f"({', '.join(f'{k}={v}' for k, v in choices.items())}); for the LM program add {LM_CHOICES}")
    return roles


def fingerprint(cfg: DictConfig, contract: ProgramContract, inputs: Inputs) -> dict[str, Any]:
    program = OmegaConf.to_container(cfg.program, resolve=True)
    for k in ("optimize", "compiled"):
        program.pop(k, None)
    compiled = cfg.program.get("compiled")
    if compiled and not Path(compiled).is_file():
        relative = "" if Path(compiled).is_absolute() else (
            f"; it is read from {Path.cwd()}: start main.py in the clinprog folder, or set CLINPROG_ROOT to it")
        raise ConfigError(f"program.compiled={compiled}: no such file (a state saved by task=compile, "
                          f"program.optimize.save_to){relative}")
    return {
        "program": program,
        "lm": lm_identity(cfg) if contract.lm_roles(cfg) else None,
        "inputs": {name: file_sha256(path) for name, path in sorted(inputs.files.items())},
        "compiled": file_sha256(compiled) if compiled else None,
        "seed": cfg.get("seed"),
        **contract.fingerprint_extra(cfg),
    }


def check_data_limit(cfg: DictConfig, contract: ProgramContract) -> None:
    """data.limit (the first N items) is a positive integer or null (`-1` would silently drop the last item)."""
    number_in("data.limit", (cfg.get("data") or {}).get("limit"), 1, integer=True, null=True,
              note=f"the first N {contract.unit}s; null: every {contract.unit}")


def finish(cfg: DictConfig, contract: ProgramContract, inputs: Inputs, records: list[dict[str, Any]]) -> Any:
    out = output_dir()
    contract.write_submission(records, out)
    contract.write_readable(cfg, inputs, records, out)   # answers.md (+ the numbered notes of plain rows)
    usage = contract.usage(records)
    write_json(out / "usage.json", usage)
    scores = contract.score(cfg, inputs, records) if records else None
    if scores is not None:
        write_json(out / "scores.json", scores)
        contract.print_scores(scores)
    write_text(out / "report.md", contract.report(cfg, usage, scores))
    write_text(out / "report.html", contract.report_html(cfg, inputs, records, usage, scores))
    # a knob left null shows the fitted value the run used ("fitted: 0.375")
    write_json(out / "config.json", fitted_knobs(OmegaConf.to_container(cfg, resolve=True)))
    return scores


def run(cfg: DictConfig) -> float | None:
    """task=run"""
    contract = contract_for(cfg)
    check_data_limit(cfg, contract)
    inputs = contract.load(cfg)          # bad input fails here, before any LM is built or called
    inputs = select_shard(cfg, contract, inputs)   # data.num_shards=N data.shard=K: the K-th slice
    roles = choose_lm_or_no_lm(cfg, contract)
    out = output_dir()
    with RunFolder(out, fingerprint(cfg, contract, inputs), str(cfg.get("run", {}).get("resume", "auto"))) as folder:
        executor = executor_for(cfg, contract.unit)
        # a missing key / dead server fails here (Ray: in every worker's build, the same line)
        predict = built_by_workers if getattr(executor, "builds_own_program", False) else build_predictor(cfg, contract, roles)
        predictions = PredictionLog(folder.predictions, contract.record_id, contract.record_problem)
        try:
            done = run_resumable(inputs.items, contract.item_id, predict, predictions, executor,
                                 num_threads=int(cfg.lm.get("num_threads", 1)) if roles else 1,
                                 progress=cfg.progress, unit=contract.unit)
        except Interrupted as exc:
            # a rerun makes a new timestamped folder unless it names this one
            line = (f"interrupted: {exc.saved} {contract.unit}s saved in {out}; to resume, rerun the same command "
                    f"with {shlex.quote(f'hydra.run.dir={out}')}")
            print(line, file=sys.stderr)
            append_main_log(out, line)
            raise SystemExit(130) from None
        except ClinprogError:
            # e.g. the LM server died mid-run: the outputs of what finished are written before the error
            partial = predictions.read()
            records = [partial[contract.item_id(i)] for i in inputs.items if contract.item_id(i) in partial]
            if records:
                finish(cfg, contract, inputs, records)
                log.warning("%d of %d %ss finished; outputs written for them in %s", len(records), len(inputs.items),
                            contract.unit, out)
            raise
        records = list(done.values())
        scores = finish(cfg, contract, inputs, records)
    print(f"{len(records)} {contract.unit}s; outputs: {out}")
    return contract.objective(scores)


def evaluate(cfg: DictConfig) -> float | None:
    """task=evaluate: score the submission file(s) at `data.submissions` (or `data.predictions`), or run then score."""
    contract = contract_for(cfg)
    check_data_limit(cfg, contract)
    path = cfg.data.get("submissions") or cfg.data.get("predictions")
    if not path:
        return run(cfg)
    inputs = contract.load(cfg)
    scores = contract.score_files(cfg, inputs, str(path))
    if scores is None:
        raise ConfigError(f"program={contract.name}: these inputs carry no references to score against")
    write_json(output_dir() / "scores.json", scores)
    contract.print_scores(scores)
    print(f"scores: {output_dir() / 'scores.json'}")
    return contract.objective(scores)


def compile_task(cfg: DictConfig) -> float | None:
    """task=compile: optimize on data.train, score data.val before/after, save the compiled state."""
    import dspy

    from lms import build_role_lms
    from runners.compile import compile_program

    contract = contract_for(cfg)
    trainset, valset = contract.examples(cfg, "train"), contract.examples(cfg, "val")
    roles = choose_lm_or_no_lm(cfg, contract)
    configure_dspy(cfg)
    if roles:
        # One LM for every role while compiling: optimizers deep-copy the program, which must not copy LM engines.
        dspy.configure(lm=build_role_lms(cfg.lm, roles[:1])[roles[0]])
    return compile_program(cfg, contract, contract.build(cfg, None), trainset, valset)
