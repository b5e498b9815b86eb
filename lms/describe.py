"""Which backend and model an LM config runs, as messages and reports name them."""

from __future__ import annotations

from typing import Any


def lm_model(cfg: Any, role: str) -> str:
    """`lm.roles.<role>` overrides the shared client (an LM per role); the file or model name, without its folder."""
    names = ("model", "model_path", "package_file", "package")
    for client in (dict((cfg.lm.get("roles") or {}).get(role) or {}), dict(cfg.lm.get("client") or {})):
        model = next((client[k] for k in names if client.get(k)), None)
        if model:
            return str(model).rsplit("/", 1)[-1]
    return "?"


def backend_name(client: Any) -> str:
    """`openai_compatible` for `_target_: lms.factory.openai_compatible_lm` (the builder's name, as `lm=` names it)."""
    return str((client or {}).get("_target_", "")).rsplit(".", 1)[-1].removesuffix("_lm")
