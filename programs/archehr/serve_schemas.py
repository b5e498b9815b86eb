"""`task=serve program=archehr|archehr2025`: the request and response bodies of `POST /v1/<program>/answer`
(pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

# a field the endpoint does not know is refused (422 naming it), never dropped without a word
STRICT_FIELDS = ConfigDict(extra="forbid")


class NoteSentenceIn(BaseModel):
    model_config = STRICT_FIELDS
    id: str = Field(min_length=1, description="the sentence id, as in the official XML")
    text: str = Field(min_length=1)


class ArchEHRRequest(BaseModel):
    """One case: the patient's narrative, optional marked question phrases and the note's sentences; or the
    official XML of one case in `xml`."""

    model_config = STRICT_FIELDS
    # `id` and `message` as in a plain row of data.cases (docs/archehr.md), so a row posts as it is
    case_id: str = Field("request", validation_alias=AliasChoices("case_id", "id"))
    patient_narrative: str | None = Field(None, validation_alias=AliasChoices("patient_narrative", "message"))
    patient_question: list[str] = Field(default_factory=list, description="marked question phrases, if any")
    clinician_question: str | None = Field(None, description="given (ArchEHR-QA 2025) or produced by stage 1")
    sentences: list[NoteSentenceIn] = Field(default_factory=list, description="the note excerpt, one item a sentence")
    note: str | None = Field(None, description="alternatively: the note as plain text, split into sentences numbered "
                                               "from 1 (one per line; a line of several split at sentence ends)")
    xml: str | None = Field(None, description="alternatively: `<annotations><case>...</case></annotations>`")
    xml_base64: str | None = Field(None, description="alternatively: an XML file's bytes in base64 (what the page "
                                                     "sends), decoded by its own encoding declaration as data.cases")

    @model_validator(mode="after")
    def one_form(self) -> ArchEHRRequest:
        if self.xml is not None and self.xml_base64 is not None:
            raise ValueError("give the case as xml or as xml_base64, not both")
        xml = self.xml if self.xml is not None else self.xml_base64
        if xml is None and not (self.patient_narrative or "").strip():
            raise ValueError("give patient_narrative (with sentences or note) or xml")
        # one source per request: a case in `xml` beside fields of another would silently drop one of them
        beside = [name for name, given in (("case_id", self.case_id != "request"),
                                           ("patient_narrative", self.patient_narrative is not None),
                                           ("patient_question", bool(self.patient_question)),
                                           ("clinician_question", self.clinician_question is not None),
                                           ("sentences", bool(self.sentences)), ("note", self.note is not None))
                  if given]
        if xml is not None and beside:
            raise ValueError(f"give the case as xml or as fields, not both: xml holds the whole case, so "
                             f"{', '.join(beside)} would be ignored")
        if self.note is not None and self.sentences:
            raise ValueError("give the note as sentences or as note text, not both")
        counts = Counter(s.id for s in self.sentences)  # linear in the ids
        dupes = sorted(i for i, n in counts.items() if n > 1)
        if dupes:
            raise ValueError(f"sentences: duplicate ids {dupes[:10]}" + (f" and {len(dupes) - 10} more" if len(dupes) > 10
                                                                         else ""))
        return self


class ArchEHRResponse(BaseModel):
    case_id: str
    clinician_question: str
    question_candidates: list[dict[str, Any]] | None = Field(
        None, description="the learned question stage's candidates, the pick first, each with its rerank score and "
                          "parts and why it lost (`excluded`); null for a stage that writes one question")
    evidence_ids: list[str]
    scores: dict[str, int] | None
    selection: str | None
    answer: str | None
    answer_sentences: list[dict[str, Any]] | None = None
    sentences: list[dict[str, str]] = Field(default_factory=list, description="the note's sentences as read (ids "
                                                                               "and texts; a `note` text numbered)")
    alignment: list[dict[str, Any]]
    grounding: list[dict[str, Any]] | None
    fallbacks: dict[str, str]
    lm_failure: str | None = Field(None, description="set when the LM failed and the non-LLM program answered")
    usage: dict[str, Any]
    seconds: float
