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
        super()._prepare_response_format(lm, lm_kwargs, signature)
        fmt = lm_kwargs.get("response_format")
        if not hasattr(fmt, "model_json_schema"):
            return  # plain JSON mode, or no structured output on this backend
        overrides = {
            name: field.json_schema_extra[SCHEMA_KEY]
            for name, field in signature.output_fields.items()
            if isinstance(field.json_schema_extra, dict) and SCHEMA_KEY in field.json_schema_extra
        }
        if not overrides:
            return
        schema = copy.deepcopy(fmt.model_json_schema())
        for name, extra in overrides.items():
            prop = schema.get("properties", {}).get(name)
            if prop is not None:
                prop.update(copy.deepcopy(extra))
        fmt.model_json_schema = lambda *args, **kwargs: schema
