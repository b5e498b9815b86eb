"""MedReAct'N'MedReFlex with scripted DummyLMs: every branch of the agent loop."""

import pytest

from programs.mediqa_corr.medeval import accept
from tasks.mediqa_corr.data import Note
from tests.builders import program

pytestmark = pytest.mark.unit

NOTE = Note("ms-val-9", "t", (("0", "A 30-year-old man has fever."), ("1", "He is treated with penicillin for MRSA."),
                             ("2", "He recovers.")), 1, 1, "He is treated with penicillin for MRSA.",
            "He is treated with vancomycin for MRSA.")


def step(action, sid=-1, corrected="", query=""):
    return {"observation": "obs", "thought": "think", "action": action, "search_query": query,
            "sentence_id": sid, "corrected_sentence": corrected}


def reviews(*scores):
    return [{"reasoning": f"r{i}", "score": s} for i, s in enumerate(scores)]


def test_accepted_on_the_first_episode(dummy_lm):
    lm = dummy_lm([step("final_mistake", 1, "treated with vancomycin for MRSA"), *reviews(4, 4, 4, 4, 4),
                   {"corrected_sentence": "He is treated with vancomycin for MRSA."}])
    pred = program("mediqa_corr")(note=NOTE)
    assert pred.correction.line() == 'ms-val-9 1 1 "He is treated with vancomycin for MRSA."'
    assert pred.outcome == "accepted" and pred.react_steps == 1 and pred.reflexion_turns == 0
    assert pred.review_scores == [[4, 4, 4, 4, 4]] and pred.lm_calls == 7 and len(lm.history) == 7


def test_one_review_of_2_rejects_although_the_average_is_4(dummy_lm):
    lm = dummy_lm([step("final_mistake", 1, "vancomycin"), *reviews(5, 5, 4, 4, 2), {"reflection": "check the drug"}])
    pred = program("mediqa_corr", "program.reflexion.max_episodes=1")(note=NOTE)
    assert accept([5, 5, 4, 4, 2], 3.8, 3) is False and accept([5, 5, 4, 4, 3], 3.8, 3) is True
    # the only episode failed: no reflexion, since no later episode would read it
    assert pred.review_scores == [[5, 5, 4, 4, 2]] and pred.reflexion_turns == 0 and len(lm.history) == 6
    assert pred.reflections == [] and pred.episodes[0]["reflection"] is None
    assert pred.correction.line() == "ms-val-9 0 -1 NA"


def test_n_steps_without_an_answer_trigger_reflexion_which_the_next_episode_reads(dummy_lm):
    lm = dummy_lm([step("search", query="MRSA treatment"), step("search", query="penicillin MRSA"),
                   {"reflection": "MRSA is resistant to penicillin"},
                   step("final_mistake", 1, "vancomycin"), *reviews(5, 5, 5, 5, 5), {"corrected_sentence": "x"}])
    pred = program("mediqa_corr", "program.react.max_steps=2", search=lambda query: f"results for {query}")(note=NOTE)
    assert pred.react_steps == 3 and pred.searches == 2 and pred.reflexion_turns == 1
    reread = lm.history[3]["messages"][-1]["content"]
    assert "MRSA is resistant to penicillin" in reread  # the second episode's prompt carries the memory
    assert pred.outcome == "accepted"


def test_m_failed_episodes_conclude_no_error(dummy_lm):
    dummy_lm([step("search", query="q1"), {"reflection": "r1"}, step("search", query="q2"), {"reflection": "r2"}])
    agent = program("mediqa_corr", "program.react.max_steps=1", "program.reflexion.max_episodes=2",
                    search=lambda query: "nothing")
    pred = agent(note=NOTE)
    assert pred.correction.line() == "ms-val-9 0 -1 NA" and pred.outcome == "no_error_after_max_episodes"
    assert pred.reflexion_turns == 1 and pred.reflections == ["r1"]  # none after the last episode


def test_a_search_that_raises_becomes_an_observation(dummy_lm):
    def broken(query):
        raise ConnectionError("index offline")

    lm = dummy_lm([step("search", query="q"), step("no_error")])
    pred = program("mediqa_corr", "program.react.max_steps=2", search=broken)(note=NOTE)
    assert "search failed: ConnectionError: index offline" in lm.history[1]["messages"][-1]["content"]
    assert pred.outcome == "agent_no_error" and pred.correction.flag == 0


def test_malformed_lm_output_is_handled(dummy_lm):
    dummy_lm([{"garbage": 1}, step("final_mistake", 7, "no such sentence"), {"reflection": "r"}])
    pred = program("mediqa_corr", "program.react.max_steps=2", "program.reflexion.max_episodes=1")(note=NOTE)
    assert pred.parse_failures == 1 and pred.correction.flag == 0  # id 7 is not in the note: never submitted


def test_unparsable_review_counts_as_the_lowest_score(dummy_lm):
    dummy_lm([step("final_mistake", 1, "vancomycin"), *reviews(5, 5, 5, 5), {"bad": "review"}, {"reflection": "r"}])
    pred = program("mediqa_corr", "program.reflexion.max_episodes=1")(note=NOTE)
    assert pred.review_scores == [[5, 5, 5, 5, 1]] and pred.correction.flag == 0
    assert pred.parse_failures == 1  # counted where usage.json and the report's filter read it


def test_a_correction_that_repeats_its_sentence_is_not_reviewed_and_flags_nothing(dummy_lm):
    lm = dummy_lm([step("final_mistake", 1, "He is treated with penicillin for MRSA")])
    pred = program("mediqa_corr", "program.reflexion.max_episodes=1")(note=NOTE)
    assert pred.correction.line() == "ms-val-9 0 -1 NA" and pred.outcome == "no_error_after_max_episodes"
    assert pred.episodes[0]["unchanged"] is True and pred.review_scores == [] and len(lm.history) == 1


def test_an_accepted_correction_the_parser_gives_back_unchanged_is_no_correction(dummy_lm):
    lm = dummy_lm([step("final_mistake", 1, "vancomycin"), *reviews(5, 5, 5, 5, 5),
                   {"corrected_sentence": "He is treated with penicillin for MRSA."}, {"reflection": "change the drug"},
                   step("final_mistake", 1, "vancomycin"), *reviews(5, 5, 5, 5, 5),
                   {"corrected_sentence": "He is treated with vancomycin for MRSA."}])
    pred = program("mediqa_corr", "program.reflexion.max_episodes=2")(note=NOTE)
    assert pred.episodes[0]["unchanged"] is True and pred.episodes[0]["accepted"] is True
    assert "repeats sentence 1 unchanged" in lm.history[7]["messages"][-1]["content"]  # the reflexion reads why
    assert pred.correction.line() == 'ms-val-9 1 1 "He is treated with vancomycin for MRSA."'
    assert pred.outcome == "accepted" and pred.reflexion_turns == 1
