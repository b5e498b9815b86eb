"""Per-call JSON-schema bounds on output fields (evidence ids of this note, a length), which `ConstrainedJSONAdapter`
merges into the schema grammar-capable backends (llama.cpp, Gemini) decode under. DSPy's parsing stays lenient: a
stage drops and counts bad ids itself instead of failing the whole call."""

from __future__ import annotations

import copy
from typing import Any

import dspy

SCHEMA_KEY = "output_schema"
VARIANTS_KEY = "output_variants"


def reply_bound(max_tokens: int | None) -> dict[str, int]:
    """A predictor call's `config` bounding the reply (empty: the LM's own max_tokens)."""
    return {"max_tokens": int(max_tokens)} if max_tokens else {}


def with_output_schema(signature: type[dspy.Signature], field: str, json_schema: dict[str, Any]) -> type[dspy.Signature]:
    """Return `signature` with `json_schema` attached to output `field` (instructions and types unchanged)."""
    return signature.with_updated_fields(field, **{SCHEMA_KEY: dict(json_schema)})


def with_output_variants(signature: type[dspy.Signature], field: str,
                         variants: dict[str, dict[str, dict[str, Any]]]) -> type[dspy.Signature]:
    """Return `signature` whose output `field` (a choice, written before the fields it governs) bounds the others:
    `variants` maps each value of `field` to per-field schemas, e.g. {"no_error": {"sentence_id": {"const": -1}}}.
    Backends that decode a grammar (an LM with `grammar_variants`, a server with
    `structured_output=json_object_schema`) get one object schema per value (`anyOf`); the others the flat schema."""
    return signature.with_updated_fields(field, **{VARIANTS_KEY: {k: dict(v) for k, v in variants.items()}})


class ConstrainedJSONAdapter(dspy.JSONAdapter):
    """DSPy's JSONAdapter with the per-field schemas of `with_output_schema`, and strict text: a list or an object for a
    `str` field is a parse failure (the stage's fallback), never the text "['x']" DSPy's str() would make."""

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
        # llama.cpp's grammar takes a root `anyOf` of objects
        schema = self.schema(signature, fmt.model_json_schema(), variants=bool(getattr(lm, "grammar_variants", False)))
        fmt.model_json_schema = lambda *args, **kwargs: schema

    def schema(self, signature, base: dict[str, Any] | None = None, variants: bool = False) -> dict[str, Any]:
        """The signature's output JSON schema with the per-case bounds attached by `with_output_schema`; with
        `variants`, one object schema per value of a field given `with_output_variants` (an `anyOf`)."""
        if base is None:
            from dspy.adapters.json_adapter import _get_structured_outputs_response_format

            base = _get_structured_outputs_response_format(signature, self.use_native_function_calling) \
                .model_json_schema()
        schema = copy.deepcopy(base)
        governing = None  # (field, its variants): the field whose value decides the others' bounds
        for name, field in signature.output_fields.items():
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            prop = schema.get("properties", {}).get(name)
            if SCHEMA_KEY in extra and prop is not None:
                prop.update(copy.deepcopy(extra[SCHEMA_KEY]))
            if VARIANTS_KEY in extra and prop is not None:
                governing = name, extra[VARIANTS_KEY]
        return self._variants(schema, *governing) if variants and governing else schema

    @staticmethod
    def _variants(schema: dict[str, Any], name: str, variants: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
        """One copy of the object schema per value of `name`: that value as a constant, the other fields bounded
        as the value says. The allowed values are those the field already allows (its enum), in that order."""
        allowed = schema["properties"][name].get("enum") or list(variants)
        alternatives = []
        for value in allowed:
            alternative = copy.deepcopy(schema)
            alternative.pop("$defs", None)
            alternative["properties"][name] = {"type": "string", "const": value}
            for other, bound in variants.get(value, {}).items():
                if other in alternative["properties"]:
                    alternative["properties"][other].pop("enum", None)
                    alternative["properties"][other].update(copy.deepcopy(bound))
            alternatives.append(alternative)
        out: dict[str, Any] = {"anyOf": alternatives}
        if "$defs" in schema:
            out["$defs"] = schema["$defs"]
        return out

    def _server_response_format(self, mode: str, lm_kwargs: dict[str, Any], signature) -> None:
        """The per-case schema for a server whose accepted form we know, as DSPy's `json_schema` (the engine rewrites it
        for its server: lms/openai_compatible_engine.wire_response_format), a bare `json_object`, or nothing."""
        if mode == "none":
            lm_kwargs.pop("response_format", None)
        elif mode == "json_object":
            lm_kwargs["response_format"] = {"type": "json_object"}
        else:
            lm_kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": signature.__name__, "schema": self.schema(signature, variants=mode == "json_object_schema"),
                "strict": False}}
