"""lm=gemini: Google Gemini through the `google-genai` SDK, as a DSPy 3.4 engine. The signature's JSON schema is sent
as `response_json_schema`; SDK errors become lm15's error classes, so DSPy retries rate limits and server errors."""

from __future__ import annotations

import os
from typing import Any

from dspy import lm15
from dspy.lm15 import Response

from lms.engine import Engine, status_error, system_text, text_response
from lms.errors import LMConfigError


def _translate(exc: Exception) -> Exception:
    from google.genai import errors as genai_errors

    if isinstance(exc, genai_errors.APIError):
        status = getattr(exc, "code", None)
        kind = status_error(status) or lm15.InvalidRequestError
        return kind(str(exc), provider="gemini", status=status)
    if isinstance(exc, OSError):  # ConnectionError and TimeoutError included
        return lm15.TransportError(f"gemini: {exc}", provider="gemini")
    return exc


def _check_vertex_credentials() -> None:
    """Vertex AI authenticates with Application Default Credentials: say which are missing before the first case."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as exc:
        path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        found = (f"GOOGLE_APPLICATION_CREDENTIALS={path} could not be used ({str(exc).splitlines()[0][:160]})"
                 if path else "neither GOOGLE_APPLICATION_CREDENTIALS nor gcloud's application-default login is set")
        raise LMConfigError(
            f"lm=gemini with lm.client.vertexai=true needs Google Application Default Credentials: {found}; run `gcloud auth "
            "application-default login` or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file "
            "(or use an API key: drop lm.client.vertexai and set GEMINI_API_KEY)") from None


class GeminiEngine(Engine):
    def __init__(
        self,
        model: str,
        *,
        api_key_env: str = "GEMINI_API_KEY",
        vertexai: bool = False,
        project: str | None = None,
        location: str | None = None,
        client: Any = None,
    ) -> None:
        self.model = model
        if client is None:
            from google import genai

            if vertexai:
                if not project:
                    raise LMConfigError("lm=gemini with lm.client.vertexai=true needs lm.client.project (and location)")
                _check_vertex_credentials()
                client = genai.Client(vertexai=True, project=project, location=location or "us-central1")
            else:
                api_key = os.environ.get(api_key_env)
                if not api_key:
                    raise LMConfigError(f"lm=gemini needs an API key: set {api_key_env} (or use lm.client.vertexai=true)")
                client = genai.Client(api_key=api_key)
        self._client = client

    def _config(self, request: Any) -> Any:
        from google.genai import types

        cfg = request.config
        kwargs: dict[str, Any] = {"system_instruction": system_text(request.system)}
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if cfg.max_tokens:
            kwargs["max_output_tokens"] = cfg.max_tokens
        if cfg.top_p is not None:
            kwargs["top_p"] = cfg.top_p
        if cfg.stop:
            kwargs["stop_sequences"] = list(cfg.stop)
        if cfg.seed is not None:
            kwargs["seed"] = cfg.seed
        fmt = cfg.response_format
        if fmt:
            kwargs["response_mime_type"] = "application/json"
            if fmt.get("type") == "json_schema" and fmt.get("schema"):
                kwargs["response_json_schema"] = fmt["schema"]
        return types.GenerateContentConfig(**kwargs)

    def complete(self, request: Any) -> Response:
        from google.genai import types

        contents = [
            types.Content(role="model" if m.role == "assistant" else "user", parts=[types.Part(text=m.text or "")])
            for m in request.messages
        ]
        try:
            out = self._client.models.generate_content(model=self.model, contents=contents, config=self._config(request))
        except Exception as exc:  # translated so DSPy retries the transient ones
            raise _translate(exc) from exc
        meta = getattr(out, "usage_metadata", None)
        return text_response(out.text or "", id=getattr(out, "response_id", None), model=self.model,
                             input_tokens=getattr(meta, "prompt_token_count", None),
                             output_tokens=getattr(meta, "candidates_token_count", None))
