"""Per-call JSON-schema constraints for output fields.

A signature is static, but the valid outputs of a stage depend on the case (one score per note sentence,
evidence ids that exist in this note, a length bound). `with_output_schema` attaches a JSON schema to one
output field of a signature copy; `ConstrainedJSONAdapter` merges it into the structured-output schema that
grammar-capable backends (llama.cpp, Gemini) decode under. The Python type, and so DSPy's parsing, stays
unchanged and lenient: the stage itself drops and counts bad ids instead of failing the whole call.
"""

from __future__ import annotations

import copy
from typing import Any

import dspy

SCHEMA_KEY = "output_schema"


def reply_bound(max_tokens: int | None) -> dict[str, int]:
    """A predictor call's `config` bounding the reply (empty: the LM's own max_tokens)."""
    return {"max_tokens": int(max_tokens)} if max_tokens else {}


def with_output_schema(signature: type[dspy.Signature], field: str, json_schema: dict[str, Any]) -> type[dspy.Signature]:
    """Return `signature` with `json_schema` attached to output `field` (instructions and types unchanged)."""
    return signature.with_updated_fields(field, **{SCHEMA_KEY: dict(json_schema)})


class ConstrainedJSONAdapter(dspy.JSONAdapter):
    """DSPy's JSONAdapter, plus the per-field schemas attached with `with_output_schema`, and strict types for text:
    a list or an object where a `str` field is expected is a parse failure (the stage's fallback), never the text
    "['x']" (DSPy would otherwise cast it with str())."""

    def parse(self, signature, completion):
        import json_repair
        from dspy.utils.exceptions import AdapterParseError

        raw = json_repair.loads(completion)
        if isinstance(raw, dict):
            for name, field in signature.output_fields.items():
                if field.annotation is str and isinstance(raw.get(name), list | dict):
                    raise AdapterParseError(adapter_name=type(self).__name__, signature=signature,
                                            lm_response=completion,
                                            message=f"field {name} must be a string, got a JSON "
                                                    f"{type(raw[name]).__name__}")
        return super().parse(signature, completion)

    def _prepare_response_format(self, lm, lm_kwargs, signature):
        mode = getattr(lm, "structured_output", None)
        if mode is not None:  # a server whose accepted form we know (lms.factory.openai_compatible_lm)
            self._server_response_format(mode, lm_kwargs, signature)
            return
        super()._prepare_response_format(lm, lm_kwargs, signature)
        fmt = lm_kwargs.get("response_format")
        if not hasattr(fmt, "model_json_schema"):
            return  # plain JSON mode, or no structured output on this backend
        schema = self.schema(signature, fmt.model_json_schema())
        fmt.model_json_schema = lambda *args, **kwargs: schema

    def schema(self, signature, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """The signature's output JSON schema with the per-case bounds attached by `with_output_schema`."""
        if base is None:
            from dspy.adapters.json_adapter import _get_structured_outputs_response_format

            base = _get_structured_outputs_response_format(signature, self.use_native_function_calling) \
                .model_json_schema()
        schema = copy.deepcopy(base)
        for name, field in signature.output_fields.items():
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            prop = schema.get("properties", {}).get(name)
            if SCHEMA_KEY in extra and prop is not None:
                prop.update(copy.deepcopy(extra[SCHEMA_KEY]))
        return schema

    def _server_response_format(self, mode: str, lm_kwargs: dict[str, Any], signature) -> None:
        """The per-case schema in the form the server accepts: OpenAI/vLLM `json_schema`, llama.cpp's server
        `json_object` + `schema` (grammar-constrained), a bare `json_object`, or nothing."""
        if mode == "none":
            lm_kwargs.pop("response_format", None)
        elif mode == "json_object":
            lm_kwargs["response_format"] = {"type": "json_object"}
        elif mode == "json_object_schema":
            lm_kwargs["response_format"] = {"type": "json_object", "schema": self.schema(signature)}
        else:
            lm_kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": signature.__name__, "schema": self.schema(signature), "strict": False}}
