"""`task=serve`: build the configured program once and serve it over HTTP (uvicorn); the API is serving/app.py."""

from __future__ import annotations

import contextlib
import io
import logging
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from common.contract import ProgramContract
from common.errors import ConfigError

log = logging.getLogger(__name__)


def build_no_lm_program(cfg: DictConfig, contract: ProgramContract, overrides: list[str] | None = None) -> Any:
    """The same program composed with `lm=none`, to answer when the LM fails; None when the program has no non-LLM
    stages. Outside main.py, `overrides` (those `cfg` was composed with) compose it again the same way."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from runners.program import choose_lm_or_no_lm

    if HydraConfig.initialized() and GlobalHydra.instance().is_initialized():  # under main.py: the user's overrides
        overrides = [o for o in HydraConfig.get().overrides.task if not o.lstrip("+~").startswith(("lm=", "lm."))]
        # a program found on a search path the user added (hydra.searchpath=[...]) is found again
        overrides += [o for o in HydraConfig.get().overrides.hydra if o.startswith("hydra.searchpath")]
        no_lm_cfg = compose(config_name="config", overrides=[*overrides, "lm=none"])
    elif overrides is not None:  # a script that says how it composed cfg
        from common.config_groups import compose_config

        no_lm_cfg = compose_config(*[o for o in overrides if not o.lstrip("+~").startswith(("lm=", "lm."))],
                                     "lm=none")
    else:  # a composed config handed in (scripts, notebooks)
        no_lm_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
        with open_dict(no_lm_cfg):
            no_lm_cfg.lm.client = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its "no LM chosen" line would mislead: an LM is chosen
            roles = choose_lm_or_no_lm(no_lm_cfg, contract)
    except ConfigError:
        return None
    return None if roles else contract.build(no_lm_cfg, {})


def warm_up(program: Any) -> None:
    """Load the embedder now (its model, its first batch), not in the first request."""
    for _, module in program.named_sub_modules():
        if hasattr(module, "embedder"):
            embedder = module.embedder
            if hasattr(embedder, "warm_up"):  # the model loads even when every vector is in DSPy's cache
                embedder.warm_up()
            else:
                embedder.encode_queries(["warm up"])
            return


FD_RESERVE = 64  # descriptors a served program holds besides its connections (models, logs, the listening socket)


def raise_open_file_limit(max_connections: int) -> None:
    """Raise the soft open-file limit (up to the hard one) so that `serve.max_connections` fit; say so when they
    cannot."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max_connections + FD_RESERVE
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    new = want if hard == resource.RLIM_INFINITY else min(hard, want)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    except (ValueError, OSError):
        new = soft
    if new < want:
        log.warning("serve.max_connections=%d needs about %d open files, the limit is %d (ulimit -n): lower "
                    "serve.max_connections or raise the limit", max_connections, want, new)


def build_app(cfg: DictConfig, overrides: list[str] | None = None) -> tuple[Any, Any]:
    """(the ASGI app serving the configured program, its checked `serve.*` settings): the program and its no-LM
    program for LM failures, built once and warmed up."""
    from common.settings import serve_settings
    from lms import build_role_lms
    from runners.dspy_setup import configure_dspy
    from runners.program import choose_lm_or_no_lm, contract_for
    from serving.app import create_app

    settings = serve_settings(cfg)  # serve.* checked before anything loads
    settings.token()  # and the token: an empty CLINPROG_SERVE_TOKEN is one line, never an open server
    contract = contract_for(cfg)
    contract.serve_schemas()  # a program that cannot be served says so before anything loads
    roles = choose_lm_or_no_lm(cfg, contract)
    configure_dspy(cfg)
    program = contract.build(cfg, build_role_lms(cfg.lm, roles) if roles else {})  # the program loads here, once
    no_lm_program = build_no_lm_program(cfg, contract, overrides) if roles else None
    for built in (program, no_lm_program):
        if built is not None:
            warm_up(built)
    return create_app(cfg, contract, program, no_lm_program), settings


def serve(cfg: DictConfig) -> None:
    try:
        import uvicorn
    except ImportError:
        raise ConfigError('task=serve needs the server extra: pip install -e ".[server]"') from None
    from common.settings import serve_settings
    from runners.program import contract_for
    from serving.protocol import server_args

    raise_open_file_limit(serve_settings(cfg).max_connections)
    app, settings = build_app(cfg)
    contract = contract_for(cfg)
    print(f"serving program={contract.name} on http://{settings.host}:{settings.port}{contract.serve_path()} "
          "(OpenAPI: /openapi.json)", flush=True)
    uvicorn.run(app, **server_args(settings))
