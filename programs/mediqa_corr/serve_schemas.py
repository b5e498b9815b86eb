"""`task=serve program=mediqa_corr`: the request and response bodies of `POST /v1/mediqa_corr/correct`
(pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from tasks.mediqa_corr.data import text_id_problem

STRICT_FIELDS = ConfigDict(extra="forbid")  # a field the endpoint does not know is refused, not dropped


class SentenceIn(BaseModel):
    model_config = STRICT_FIELDS
    id: str = Field(min_length=1, description="the sentence id, an integer as in the official files")
    text: str = Field(min_length=1)


class MediqaRequest(BaseModel):
    model_config = STRICT_FIELDS
    text_id: str = Field("request", validation_alias=AliasChoices("text_id", "id"),  # `id` as in a plain row
                         description="the note's id in the submission line: [a-z0-9-]+, as a run's")
    sentences: list[SentenceIn] = Field(default_factory=list, description="the note, one item a sentence; ids are "
                                                                          "integers")
    note: str | None = Field(None, description="alternatively: the note as plain text, split into sentences numbered "
                                               "from 0 (one per line; a line of several split at sentence ends)")

    @model_validator(mode="after")
    def integer_ids(self) -> MediqaRequest:
        problem = text_id_problem(self.text_id)  # the run's rule (tasks/mediqa_corr/data): one line a scorer reads
        if problem:
            raise ValueError(f"text_id: {problem}")
        if self.note is not None and self.sentences:
            raise ValueError("give the note as sentences or as note text, not both")
        if self.note is None and not self.sentences:
            raise ValueError("sentences: give at least one (or the note as text in note)")
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
    sentences: list[dict[str, str]] = Field(default_factory=list, description="the note's sentences as read")
