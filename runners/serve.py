"""`task=serve`: start the HTTP API (uvicorn) for the configured program; see serving/app.py."""

from __future__ import annotations

from omegaconf import DictConfig

from common.errors import ConfigError


def serve(cfg: DictConfig) -> None:
    try:
        import uvicorn
    except ImportError:
        raise ConfigError('task=serve needs the server extra: pip install -e ".[server]"') from None
    from serving.app import create_app

    app = create_app(cfg)  # the program, its LM and embedder load here, once
    print(f"serving program={cfg.program.name} on http://{cfg.serve.host}:{cfg.serve.port} (OpenAPI: /openapi.json)",
          flush=True)
    uvicorn.run(app, host=str(cfg.serve.host), port=int(cfg.serve.port), log_level="info",
                timeout_graceful_shutdown=5)
