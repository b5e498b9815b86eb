"""MEDIQA-CORR predictions.jsonl keeps the agent trace as data: steps (thought, action, query, passages read),
proposals, reviews, decisions and reflexions; report.html shows it; markup the agents leak is stripped and counted."""

import json
import re

import pytest

from common.config_groups import compose_config
from common.contract import Inputs
from programs.mediqa_corr.contract import MediqaCorrContract
from retrieval.passage import Passage
from retrieval.retriever import Retriever
from tests.builders import program
from tests.test_mediqa_agents import NOTE, reviews, step

pytestmark = pytest.mark.unit

PASSAGES = [Passage("statpearls:mrsa#3", "MRSA is resistant to all beta-lactams, penicillin included.",
                    title="Methicillin-Resistant Staphylococcus aureus", source="statpearls"),
            Passage("textbook:pharm#12", "Vancomycin is the first-line agent for severe MRSA infections.",
                    title="Glycopeptide antibiotics", source="textbooks")]


class FakeBackend:
    """A search backend that always returns the same known passages."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def search_batch(self, queries: list[str], k: int) -> list[list[Passage]]:
        self.queries += queries
        return [list(PASSAGES) for _ in queries]

    def check_embedder(self) -> None:
        pass


def run(*overrides: str, search=None) -> dict:
    """One note through the whole program as the runner records it (predict, then a predictions.jsonl line)."""
    record = MediqaCorrContract().predict(program("mediqa_corr", *overrides, search=search), NOTE)
    return json.loads(json.dumps(record, ensure_ascii=False))


def test_predictions_hold_the_structured_trace_and_the_report_shows_it(dummy_lm):
    backend = FakeBackend()
    tool = Retriever(backend, reranker=None, k=5, rerank_k=5).as_tool(max_chars=80, max_passages=2)
    lm = dummy_lm([
        {**step("search", query="MRSA first-line treatment"), "thought": "is penicillin right for MRSA?"},
        step("final_mistake", 1, "He is treated with amoxicillin for MRSA."),
        *reviews(5, 5, 4, 2, 4),
        {"reflection": "amoxicillin is a beta-lactam too: read the passages on MRSA"},
        step("final_mistake", 1, "He is treated with vancomycin for MRSA."),
        *reviews(5, 5, 5, 5, 5),
        {"corrected_sentence": "He is treated with vancomycin for MRSA."},
    ])
    record = run("program.react.max_steps=2", search=tool)
    assert backend.queries == ["MRSA first-line treatment"] and record["outcome"] == "accepted"

    first, second = record["episodes"]
    search, answer = first["steps"]
    assert search["thought"] == "is penicillin right for MRSA?" and search["action"] == "search"
    assert search["query"] == "MRSA first-line treatment" and search["observation"] == "obs"
    assert search["passages"] == [
        {"id": "statpearls:mrsa#3", "title": "Methicillin-Resistant Staphylococcus aureus", "source": "statpearls"},
        {"id": "textbook:pharm#12", "title": "Glycopeptide antibiotics", "source": "textbooks"}]
    assert "[2] (textbooks) Glycopeptide antibiotics" in search["results"]
    assert answer["action"] == "final_mistake" and answer["sentence_id"] == 1
    assert first["proposal"] == {"sentence_id": 1, "corrected": "He is treated with amoxicillin for MRSA."}
    assert [r["score"] for r in first["reviews"]] == [5, 5, 4, 2, 4] and first["accepted"] is False
    assert [r["reasoning"] for r in first["reviews"]] == ["r0", "r1", "r2", "r3", "r4"]
    assert first["reflection"] == "amoxicillin is a beta-lactam too: read the passages on MRSA"
    assert second["accepted"] is True and second["reflection"] is None and not second["no_error"]

    # The agent reads its history exactly as before steps were structured (prompts and cache keys unchanged).
    read = lm.history[1]["messages"][-1]["content"]
    assert ("Step 1:\nObservation: obs\nThought: is penicillin right for MRSA?\nAction: search(MRSA first-line "
            "treatment)\nSearch results:\n[1] (statpearls) Methicillin-Resistant Staphylococcus aureus\n"
            "MRSA is resistant to all beta-lactams, penicillin included.\n\n[2] (textbooks)") in read

    cfg = compose_config("program=mediqa_corr")
    contract = MediqaCorrContract()
    html = contract.report_html(cfg, Inputs([NOTE], references={"labelled": True}), [record],
                                contract.usage([record]), None)
    for shown in ("MRSA first-line treatment", "statpearls:mrsa#3", "Methicillin-Resistant Staphylococcus aureus",
                  "Glycopeptide antibiotics", "is penicillin right for MRSA?", "r3", "MedEval: rejected",
                  "MedEval: accepted", "amoxicillin is a beta-lactam too"):
        assert shown in html, shown


def test_parse_failures_and_invalid_answers_are_steps(dummy_lm):
    dummy_lm([{"garbage": 1}, step("final_mistake", 7, "no such sentence"), {"reflection": "r"}])
    record = run("program.react.max_steps=2", "program.reflexion.max_episodes=1")
    failed, invalid = record["episodes"][0]["steps"]
    assert failed["parsed"] is False and "could not be parsed" in failed["note"]
    assert invalid["sentence_id"] == 7 and invalid["note"].startswith("Invalid answer: sentence 7")
    assert record["episodes"][0]["proposal"] is None


def test_a_plain_string_search_still_works_records_no_passages_and_long_texts_are_capped(dummy_lm):
    from programs.mediqa_corr.pipeline import TEXT_CAP

    dummy_lm([step("search", query="q"), step("no_error")])
    record = run("program.react.max_steps=2", search=lambda query: f"results for {query} " + "x" * 3 * TEXT_CAP)
    searched = record["episodes"][0]["steps"][0]
    assert searched["results"].startswith("results for q") and searched["passages"] == []
    assert len(searched["results"]) == TEXT_CAP + len(" [...]") and searched["results"].endswith(" [...]")
    assert record["episodes"][0]["no_error"] is True


def test_records_of_the_old_format_still_render():
    old = {"text_id": NOTE.text_id, "flag": 1, "sentence_id": 1, "corrected": "vancomycin", "line": "x",
           "outcome": "accepted", "seconds": 1.0, "lm_calls": 3, "react_steps": 1, "searches": 0,
           "parse_failures": 0, "review_scores": [[4]], "reflexion_turns": 0, "reflections": [],
           "usage": {"agent": {"seconds": 1.0, "lm_calls": 1}},
           "episodes": [{"steps": ["Step 1:\nObservation: o\nThought: <old thought>\nAction: final_mistake"],
                         "proposal": [1, "vancomycin"], "no_error": False, "accepted": True, "reflection": None,
                         "reviews": [{"criterion": "c", "score": 4, "reasoning": "old reasoning"}]}]}
    contract = MediqaCorrContract()
    html = contract.report_html(compose_config("program=mediqa_corr"),
                                Inputs([NOTE], references={"labelled": True}), [old], contract.usage([old]), None)
    html = re.sub(r"</?bdi>", "", html)  # every echoed text is isolated in <bdi>
    assert "&lt;old thought&gt;" in html and "sentence 1: vancomycin" in html and "old reasoning" in html


def test_leaked_markup_is_stripped_per_role_and_counted_in_usage(dummy_lm):
    dummy_lm([
        {**step("search", query="```MRSA treatment```"), "thought": "**penicillin** for MRSA?"},
        step("final_mistake", 1, "```\nHe is treated with vancomycin for MRSA.\n```"),
        {"reasoning": "<b>correct</b> drug", "score": 5}, *reviews(5, 5, 5, 5),
        {"corrected_sentence": 'He is treated with vancomycin for MRSA. ```json {"'},
    ])
    record = run("program.react.max_steps=2", search=lambda query: f"results for {query}")
    search, answer = record["episodes"][0]["steps"]
    assert search["thought"] == "penicillin for MRSA?" and search["query"] == "MRSA treatment"
    assert answer["corrected"] == "He is treated with vancomycin for MRSA."
    assert record["episodes"][0]["reviews"][0]["reasoning"] == "correct drug"
    assert record["corrected"] == "He is treated with vancomycin for MRSA."  # the parser's output, fence gone
    assert record["repairs"] == {"agent": 3, "evaluator": 1, "parser": 1}
    usage = MediqaCorrContract().usage([record, record])
    assert usage["repairs"] == {"total": 10, "stages": {"agent": 6, "evaluator": 2, "parser": 2}}
    from common.config_groups import compose_config

    md = MediqaCorrContract().report(compose_config("program=mediqa_corr", "lm=embedded"), usage, None)
    assert "- markup stripped from LM outputs (repairs): agent 6, evaluator 2, parser 2" in md


def test_clean_outputs_are_no_repairs(dummy_lm):
    dummy_lm([step("no_error")])
    record = run()
    assert record["repairs"] == {} and MediqaCorrContract().usage([record])["repairs"]["total"] == 0
