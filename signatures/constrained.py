"""Per-call JSON-schema constraints for output fields.

A signature is static, but the valid outputs of a stage depend on the case (one score per note sentence,
evidence ids that exist in this note). `schema_constrained` makes a type that validates like `python_type`
but publishes `json_schema`, so DSPy's JSONAdapter hands grammar-capable backends (llama.cpp, Gemini) a
schema bounded to this case, while validation stays lenient enough that the program can drop and count bad
ids itself instead of failing the whole stage.
"""

from __future__ import annotations

from typing import Any

import dspy


def schema_constrained(python_type: Any, json_schema: dict[str, Any], name: str) -> type:
    def core_schema(cls, source, handler):  # noqa: ARG001 - pydantic hook signature
        return handler.generate_schema(python_type)

    def json_schema_hook(cls, core, handler):  # noqa: ARG001 - pydantic hook signature
        return dict(json_schema)

    return type(
        name,
        (),
        {
            "__get_pydantic_core_schema__": classmethod(core_schema),
            "__get_pydantic_json_schema__": classmethod(json_schema_hook),
        },
    )


def with_output_schema(
    signature: type[dspy.Signature], field: str, python_type: Any, json_schema: dict[str, Any]
) -> type[dspy.Signature]:
    """Return `signature` with `field` retyped to publish `json_schema` (instructions and demos unchanged)."""
    type_name = getattr(python_type, "__name__", None) or str(python_type)
    return signature.with_updated_fields(field, type_=schema_constrained(python_type, json_schema, type_name))
