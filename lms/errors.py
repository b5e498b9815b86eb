"""One error type for every LM setup or runtime problem, so the CLI can print it as one line."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from common.errors import ClinprogError
from lms.describe import backend_name


class LMConfigError(ClinprogError, RuntimeError):
    """A backend cannot be used: missing API key, unreachable server, missing model file."""


class LMRuntimeError(LMConfigError):
    """The backend failed while the run was using it: unreachable, timed out, or answered with an error."""


# Where each API backend sends its requests when the config names no api_base.
DEFAULT_HOSTS = {"gemini": "generativelanguage.googleapis.com", "openai": "api.openai.com"}


def lm_failure(lm_cfg: Any, exc: BaseException) -> LMRuntimeError:
    """One line naming the backend, its host and what failed; the API key (if any) never appears in it."""
    client = lm_cfg.get("client") or {}
    backend = backend_name(client) or "lm"
    host = urlparse(str(client.get("api_base"))).netloc if client.get("api_base") else DEFAULT_HOSTS.get(backend)
    detail, seen = exc, {id(exc)}
    # The transport error (DNS, refused, timeout) under DSPy's wrapper; SDK errors can chain back to themselves.
    while detail.__cause__ is not None and id(detail.__cause__) not in seen and str(detail.__cause__).strip():
        detail = detail.__cause__
        seen.add(id(detail))
    text = (str(detail).strip().splitlines() or [""])[0][:240]
    key_env = client.get("api_key_env")
    secret = os.environ.get(key_env) if key_env else None
    if secret:
        text = text.replace(secret, "***")
    where = f"lm={backend}" + (f" ({host})" if host else "") + f", model {client.get('model')}"
    return LMRuntimeError(f"{where} failed: {type(detail).__name__}: {text}")
