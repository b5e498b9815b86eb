"""The per-case JSON schema reaches a grammar-capable engine (the embedded LM path), with the right bounds."""

import json

import dspy
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage

from signatures.constrained import ConstrainedJSONAdapter
from tasks.archehr.data import AnswerSentence, NoteSentence
from tests.builders import archehr_stage

pytestmark = pytest.mark.unit


class CapturingEngine:
    """A schema-capable engine that records each request and replies with scripted JSON."""

    supports_response_schema = True
    supported_params = frozenset({"response_format", "temperature", "max_tokens"})

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        text = json.dumps(self.replies.pop(0))
        return Response(id=None, model="capture", message=Message.assistant((TextPart(text),)), finish_reason="stop",
                        usage=Usage(input_tokens=1, output_tokens=1))

    def stream(self, request):
        raise NotImplementedError

    def close(self):
        pass


def configure(replies):
    engine = CapturingEngine(replies)
    dspy.configure(lm=dspy.LM("capture/test", engine=engine, cache=False), adapter=ConstrainedJSONAdapter())
    return engine


def schema_of(request, field):
    return request.config.response_format["schema"]["properties"][field]


def test_evidence_schema_has_one_likert_item_per_sentence():
    engine = configure([{"scores": [5, 1, 4]}])
    sents = [NoteSentence(str(i), f"s{i}") for i in (1, 2, 3)]
    out = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=sents)
    prop = schema_of(engine.requests[0], "scores")
    assert prop["minItems"] == prop["maxItems"] == 3 and prop["items"]["enum"] == [1, 2, 3, 4, 5]
    assert out.evidence_ids == ["1", "3"]


def test_alignment_schema_enumerates_note_ids_and_bounds_citations():
    engine = configure([{"citations": [["2"], []]}])
    sents = [NoteSentence("0", "header"), NoteSentence("2", "s")]
    aligner = archehr_stage("alignment", "lm", "program.alignment.max_citations=2")
    aligner(answer_sentences=[AnswerSentence("1", "a"), AnswerSentence("2", "b")], sentences=sents)
    prop = schema_of(engine.requests[0], "citations")
    assert prop["minItems"] == prop["maxItems"] == 2
    assert prop["items"]["items"]["enum"] == ["0", "2"] and prop["items"]["maxItems"] == 2


def test_string_fields_are_length_bounded_and_still_parse_as_text():
    engine = configure([{"clinician_question": "Why was the cath done?"}])
    out = archehr_stage("question", "lm")(patient_narrative="n")
    assert schema_of(engine.requests[0], "clinician_question")["maxLength"] == 180
    assert out.clinician_question == "Why was the cath done?" and out.fallback is None


def test_the_agent_may_search_only_where_it_reads_the_results_the_last_step_and_a_run_without_search_must_act():
    from programs.mediqa_corr.react import MedReAct
    from tests.test_mediqa_agents import NOTE, step

    engine = configure([step("search", query="MRSA"), step("no_error")])
    MedReAct(max_steps=2, search=lambda query: "results")(note=NOTE, reflections=[])
    first, last = (schema_of(r, "action") for r in engine.requests)
    assert set(first["enum"]) == {"search", "final_mistake", "no_error"}
    assert last["enum"] == ["final_mistake", "no_error"]  # its results would never be read

    engine = configure([step("final_mistake", 1, "He is treated with vancomycin for MRSA.")])
    out = MedReAct(max_steps=4, search=None)(note=NOTE, reflections=[])
    assert schema_of(engine.requests[0], "action")["enum"] == ["final_mistake", "no_error"]
    assert out.episode.proposal == (1, "He is treated with vancomycin for MRSA.") and out.steps == 1


def test_a_grammar_backend_gets_one_object_per_action_so_a_mistake_names_a_sentence_of_the_note():
    """llama.cpp decodes the agent's reply under a grammar: after `final_mistake` only this note's ids and a
    non-empty correction can follow; after `no_error` or `search`, -1. Other backends get the flat schema."""
    from programs.mediqa_corr.react import MedReAct
    from tests.test_mediqa_agents import NOTE, step

    engine = configure([step("search", query="MRSA"), step("no_error")])
    dspy.settings.lm.grammar_variants = True
    MedReAct(max_steps=2, search=lambda query: "results")(note=NOTE, reflections=[])
    first, last = (r.config.response_format["schema"] for r in engine.requests)
    by_action = {alt["properties"]["action"]["const"]: alt["properties"] for alt in first["anyOf"]}
    assert list(by_action) == ["search", "final_mistake", "no_error"]
    assert by_action["final_mistake"]["sentence_id"]["enum"] == [0, 1, 2]
    assert by_action["final_mistake"]["corrected_sentence"]["minLength"] == 1
    assert by_action["final_mistake"]["corrected_sentence"]["maxLength"] == 400  # the step's bound is kept
    assert by_action["no_error"]["sentence_id"]["const"] == -1 and "enum" not in by_action["no_error"]["sentence_id"]
    assert by_action["search"]["search_query"]["minLength"] == 1
    assert [alt["properties"]["action"]["const"] for alt in last["anyOf"]] == ["final_mistake", "no_error"]

    # llama.cpp's own converter turns it into a grammar (what the embedded engine hands to llama.cpp)
    from llama_cpp.llama_grammar import LlamaGrammar

    assert LlamaGrammar.from_json_schema(json.dumps(last), verbose=False) is not None

    # the same signature on a backend without the grammar: one flat object, as before
    engine = configure([step("no_error")])
    MedReAct(max_steps=1, search=None)(note=NOTE, reflections=[])
    flat = engine.requests[0].config.response_format["schema"]
    assert "anyOf" not in flat and flat["properties"]["sentence_id"]["enum"] == [-1, 0, 1, 2]


def test_the_llama_cpp_server_form_takes_the_variants_and_the_openai_form_does_not():
    from lms.openai_compatible_engine import wire_response_format
    from programs.mediqa_corr.react import ACTING
    from signatures.constrained import with_output_variants
    from signatures.mediqa_corr import MedReActStep

    signature = with_output_variants(MedReActStep, "action", {a: {"sentence_id": {"const": -1}} for a in ACTING})
    adapter = ConstrainedJSONAdapter()
    for mode, variants in (("json_object_schema", True), ("json_schema", False)):
        kwargs = {}
        adapter._server_response_format(mode, kwargs, signature)
        wire = wire_response_format(mode, kwargs["response_format"])  # what lm=openai_compatible's engine sends
        assert wire["type"] == ("json_object" if variants else "json_schema")
        schema = wire["schema"] if mode == "json_object_schema" else wire["json_schema"]["schema"]
        assert ("anyOf" in schema) is variants, mode
