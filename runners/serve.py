"""`task=serve`: build the configured program once and serve it over HTTP (uvicorn); the API is serving/app.py."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from common.contract import ProgramContract
from common.errors import ConfigError


def no_lm_twin(cfg: DictConfig, contract: ProgramContract) -> Any:
    """The program without an LM, to answer when the LM fails; None when the program has no non-LLM stages."""
    from runners.program import choose_lm_or_offline

    offline_cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    with open_dict(offline_cfg):
        offline_cfg.lm.client = None
    try:
        choose_lm_or_offline(offline_cfg, contract)
    except ConfigError:  # every stage needs an LM: the contract's fallback record answers instead
        return None
    return contract.build(offline_cfg, {})


def warm_up(program: Any) -> None:
    """Load the embedder now (its model, its first batch), not in the first request."""
    for _, module in program.named_sub_modules():
        if hasattr(module, "embedder"):
            module.embedder.encode_queries(["warm up"])
            return


def serve(cfg: DictConfig) -> None:
    try:
        import uvicorn
    except ImportError:
        raise ConfigError('task=serve needs the server extra: pip install -e ".[server]"') from None
    from lms import build_role_lms
    from runners.common import configure_dspy
    from runners.program import choose_lm_or_offline, contract_for
    from serving.app import create_app

    contract = contract_for(cfg)
    contract.serve_schemas()  # a program that cannot be served says so before anything loads
    roles = choose_lm_or_offline(cfg, contract)
    configure_dspy(cfg)
    program = contract.build(cfg, build_role_lms(cfg.lm, roles) if roles else {})  # the program loads here, once
    twin = no_lm_twin(cfg, contract) if roles else None
    for built in (program, twin):
        if built is not None:
            warm_up(built)
    app = create_app(cfg, contract, program, twin)
    print(f"serving program={contract.name} on http://{cfg.serve.host}:{cfg.serve.port}{contract.serve_path()} "
          "(OpenAPI: /openapi.json)", flush=True)
    uvicorn.run(app, host=str(cfg.serve.host), port=int(cfg.serve.port), log_level="info",
                timeout_graceful_shutdown=5)
