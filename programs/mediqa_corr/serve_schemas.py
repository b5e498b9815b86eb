"""`task=serve program=mediqa_corr`: the request and response bodies of `POST /v1/mediqa_corr/correct`
(pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator


class SentenceIn(BaseModel):
    id: str = Field(min_length=1, description="the sentence id, an integer as in the official files")
    text: str = Field(min_length=1)


class MediqaRequest(BaseModel):
    text_id: str = "request"
    sentences: list[SentenceIn] = Field(min_length=1, description="the note, one item a sentence; ids are integers")

    @model_validator(mode="after")
    def integer_ids(self) -> MediqaRequest:
        bad = [s.id for s in self.sentences if not s.id.lstrip("-").isdigit()]
        if bad:
            raise ValueError(f"sentences: ids must be integers, not {bad[:5]}")
        ids = [s.id for s in self.sentences]
        if len(set(ids)) != len(ids):
            raise ValueError("sentences: duplicate ids")
        return self


class MediqaResponse(BaseModel):
    text_id: str
    flag: int
    sentence_id: int
    correction: str
    line: str
    outcome: str
    lm_failure: str | None = None
    episodes: list[dict[str, Any]]
    usage: dict[str, Any]
    seconds: float
