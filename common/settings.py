"""Typed schemas of the config's user-settable numbers, validated before any task runs: a value that cannot work is
one `error:` line naming the key. A schema lists every key of its section's YAML and rejects a key it does not know."""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from common.errors import ConfigError, unknown_setting

STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


def _int(low: int, high: int | None = None, **kw: Any) -> Any:
    says = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"
    return Field(ge=low, le=high, description=says, **kw)


def _seconds(**kw: Any) -> Any:
    return Field(gt=0, allow_inf_nan=False, description="a number of seconds > 0", **kw)


class ServeSettings(BaseModel):
    """`serve.*` (task=serve; serving/app.py). Connections and bodies are bounded before the program sees them."""

    model_config = STRICT
    host: str = Field("127.0.0.1", min_length=1, description="a host name or address")
    port: int = _int(1, 65535, default=8080)
    max_concurrency: int = _int(1, default=2)
    max_queue: int = _int(0, default=16)
    timeout_s: float = _seconds(default=120.0)
    max_request_bytes: int = _int(1, default=2_000_000)
    max_sentences: int = _int(1, default=2000)
    token_env: str | None = Field("CLINPROG_SERVE_TOKEN", description="an environment variable's name or null")
    log_bodies: bool = Field(False, description="true or false")
    max_connections: int = _int(1, default=256)
    max_body_readers: int = _int(1, default=32)
    read_timeout_s: float = _seconds(default=10.0)
    keep_alive_s: float = _seconds(default=5.0)

    def token(self) -> str | None:
        """The bearer token the server requires (the variable `token_env` names), None when that is unset. An empty or
        blank value is refused, never read as "no token"; so is whitespace around it (no header carries it)."""
        value = os.environ.get(self.token_env) if self.token_env else None
        if value is None:
            return None
        if not value.strip():
            raise ConfigError(f"{self.token_env} is set but {'empty' if not value else 'blank'}: set it to a token "
                              "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'), or unset it "
                              f"(unset {self.token_env}) to serve without one on a loopback address")
        if value != value.strip():
            raise ConfigError(f"{self.token_env} has whitespace around the token, which no Authorization header "
                              "carries: set it without the spaces or newline")
        return value


class LocalSettings(BaseModel):
    """`executor=local` has no settings (runners/executors/local.py)."""

    model_config = STRICT


class RaySettings(BaseModel):
    """`executor.*` of `executor=ray` (runners/executors/ray_executor.py)."""

    model_config = STRICT
    address: str | None = Field(None, description="null, auto, host:port or ray://host:port")
    num_workers: int = _int(1, default=2)
    cpus_per_worker: float = Field(1.0, gt=0, allow_inf_nan=False, description="a number of CPUs > 0")
    object_store_mb: int = _int(75, default=200)   # Ray refuses a store under 75 MB


SECTIONS: dict[str, type[BaseModel]] = {"serve": ServeSettings}
# conf/executor/'s options by _target_; a user's own executor checks its settings in its constructor
EXECUTORS: dict[str, tuple[str, type[BaseModel]]] = {
    "runners.executors.local.LocalExecutor": ("local", LocalSettings),
    "runners.executors.ray_executor.RayExecutor": ("ray", RaySettings),
}


def _node(cfg: DictConfig | dict[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if node is None:
            return None
        node = node.get(part) if hasattr(node, "get") else None
    return node


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def settings(cfg: DictConfig | dict[str, Any], key: str, schema: type[BaseModel] | None = None) -> Any:
    """Section `key` of `cfg` through its schema (SECTIONS[key] unless given; its defaults where the section is
    absent); a value that cannot work is a ConfigError naming `key.field`, what it must be and what it was."""
    schema = schema or SECTIONS[key]
    node = _plain(_node(cfg, key))
    if node is None:
        node = {}
    if not isinstance(node, dict):
        raise ConfigError(f"{key} must be a mapping of its settings, not {node!r}")
    try:
        return schema(**{str(k): v for k, v in node.items() if k != "_target_"})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        if first["type"] == "extra_forbidden":
            raise unknown_setting(f"{key}.{field}", key, schema.model_fields) from None
        info = schema.model_fields.get(str(first["loc"][0]))
        says = info.description if info is not None and info.description else first["msg"]
        raise ConfigError(f"{key}.{field} must be {says}, not {first.get('input')!r}") from None


def serve_settings(cfg: DictConfig | dict[str, Any]) -> ServeSettings:
    return settings(cfg, "serve")


def executor_target(cfg: DictConfig | dict[str, Any]) -> str:
    """The `_target_` of the chosen executor (conf/executor/; the local one when the config has none)."""
    node = _node(cfg, "executor")
    target = node.get("_target_") if hasattr(node, "get") else None
    if node is not None and not target:
        raise ConfigError(f"executor must be a config with a _target_ (executor=local | ray), not {_plain(node)!r}")
    return str(target or "runners.executors.local.LocalExecutor")


def executor_settings(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """The chosen executor's settings (`executor.*` without `_target_`), through its schema when it is one of ours."""
    known = EXECUTORS.get(executor_target(cfg))
    if known:
        return settings(cfg, "executor", known[1]).model_dump()
    node = _plain(_node(cfg, "executor")) or {}
    return {str(k): v for k, v in node.items() if k != "_target_"}


def validate(cfg: DictConfig) -> None:
    """Every schema'd section the config holds (runners/dispatch.py calls this before any task runs)."""
    for key in SECTIONS:
        if _node(cfg, key) is not None:
            settings(cfg, key)
    if _node(cfg, "executor") is not None:
        executor_settings(cfg)
