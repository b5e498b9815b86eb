"""The learned grounding verifier (issue #37): perturbations that make its training data, its weights as a DSPy
parameter (round trip, refusals), fitting through `optimizer=fit` (a teleprompter that knows no stage names), the
verdicts a run shows, and the shipped weights against the rules on the validation fabrications."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import dspy
import numpy as np
import pytest

from common.parameters import LearnedStateError
from optimizers.fit_learned import FitLearned, learned_parts
from programs.archehr.grounding.verdicts import CONTRADICTED, NOT_IN_NOTE, SUPPORTED
from programs.archehr.grounding.verifier.module import flag_threshold
from programs.archehr.grounding.verifier.pairs import note_pairs, training_pairs
from programs.archehr.grounding.verifier.perturb import CONFLICT_KINDS, LABELS, perturb
from programs.archehr.grounding.verifier.weights import VerifierWeights
from programs.archehr.report_html import _answer
from tasks.archehr.data import Case, KeyCase, NoteSentence
from tests.builders import config, grounding_check, keyed_examples, shared_embedder

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "archehr"
SHIPPED = DATA / "compiled_program.json"


def test_each_perturbation_changes_one_fact_and_keeps_the_rest():
    rng = random.Random(0)
    sentence = "Her left kidney function improved before discharge, and she was not given 40 mg of furosemide."
    changed = {kind: perturb(sentence, kind, rng, ["the scan was delayed because the machine was down."])
               for kind in CONFLICT_KINDS}
    assert all(c and c != sentence for c in changed.values()), changed
    assert "right kidney" in changed["side/site"] or "upper" in changed["side/site"] or "liver" in changed["side/site"]
    for kind, text in changed.items():  # most words kept: only the fact differs
        kept = set(sentence.lower().split()) & set(text.lower().split())
        assert len(kept) >= len(sentence.split()) - 5, (kind, text)
    assert perturb("Discharged home.", "side/site", rng, []) is None  # nothing to change: no pair


def test_training_pairs_come_from_reference_answers_and_their_citations():
    note = (NoteSentence("1", "Right knee effusion was aspirated."), NoteSentence("2", "Creatinine improved to 1.1."))
    case = Case("t1", "narrative", sentences=note)
    key = {"t1": KeyCase("t1", {"1": "essential", "2": "essential"},
                         answer_sentences=[("1", "Fluid was drained from his right knee.", ["1"]),
                                           ("2", "His kidney numbers got better, to 1.1.", ["2"])])}
    pairs = training_pairs([case], key, seed=1, rounds=2)
    supported = [p for p in pairs if LABELS[p.label] == SUPPORTED]
    assert {p.hypothesis for p in supported} == {"Fluid was drained from his right knee.",
                                                 "His kidney numbers got better, to 1.1."}
    assert all(note[0].text in p.premise or note[1].text in p.premise for p in pairs)
    assert {LABELS[p.label] for p in pairs} >= {"side/site", "direction", "quantity"}
    assert training_pairs([case], key, seed=1, rounds=2) == pairs  # seeded
    own = note_pairs([case], seed=0, per_case=5, min_words=3)
    assert own and all(p.hypothesis == note[0].text or p.hypothesis == note[1].text or LABELS[p.label] != SUPPORTED
                       for p in own)


def _fitted_weights() -> VerifierWeights:
    w = VerifierWeights(LABELS)
    n = 3
    return w.set(("a", "b", "c"), "enc", np.zeros(n), np.ones(n), np.arange(len(LABELS) * n).reshape(len(LABELS), n)
                 / 10, np.zeros(len(LABELS)), 0.7, {"pairs": 3})


def test_weights_round_trip_and_refuse_bad_states_in_one_line():
    w = _fitted_weights()
    state = json.loads(json.dumps(w.dump_state()))
    back = VerifierWeights(LABELS).load_state(state)
    assert back.threshold == 0.7 and back.features == ("a", "b", "c") and np.allclose(back.coef, w.coef)
    x = np.array([[1.0, 2.0, 3.0]])
    assert np.allclose(back.probabilities(x), w.probabilities(x)) and np.isclose(w.probabilities(x).sum(), 1.0)
    bad = [{**state, "labels": ["supported", "other"]}, {**state, "coef": [[float("nan")] * 3] * len(LABELS)},
           {**state, "threshold": 1.5}, {**state, "mean": [0.0]}, {k: v for k, v in state.items() if k != "scale"},
           {"format": "clinprog-logistic/1"}, "not a state"]
    for s in bad:
        with pytest.raises(LearnedStateError) as err:
            VerifierWeights(LABELS).load_state(s)
        assert "\n" not in str(err.value)
    assert VerifierWeights(LABELS).load_state({"format": "clinprog-verifier/1", "fitted": False}).fitted is False


def test_flag_threshold_keeps_false_flags_within_budget():
    scores = np.linspace(0.0, 0.99, 100)
    t = flag_threshold(scores, 0.05)
    assert (scores >= t).sum() == 5
    assert flag_threshold(np.zeros(0), 0.05) == 0.5
    assert (scores >= flag_threshold(scores, 0.0)).sum() == 0



def test_optimizer_fit_fits_the_verifier_through_its_own_fit_and_chooses_the_threshold_on_validation():
    check = grounding_check("learned", "program.compiled=null", "program.grounding.verifier.rounds=1",
                          "program.grounding.verifier.note_pairs_per_case=3")
    holder = dspy.Module()
    holder.grounding = check  # any program: the teleprompter walks sub-modules, it names none
    assert [n for n, _ in learned_parts(holder)] == ["grounding.verifier"]
    optimizer = FitLearned()
    fitted = optimizer.compile(holder, trainset=keyed_examples("realistic_cases_a", 3), valset=keyed_examples("bundled_cases", 2))
    assert not check.verifier.weights.fitted  # the student is left as it was; the copy is fitted
    verifier = fitted.grounding.verifier
    fit = verifier.weights.fit
    assert verifier.weights.fitted and fit["training_cases"] == 3 and fit["validation_reference_sentences"] > 0
    assert fit["validation_false_flags"] <= verifier.max_false_flags
    review = optimizer.review(fitted, [], None)
    assert review["lines"][0].startswith("grounding.verifier: pairs=") and review["refused"] == [] or review["refused"]
    state = fitted.grounding.verifier.weights.dump_state()
    assert state["encoder"] == shared_embedder().name and len(state["coef"]) == len(LABELS)


def test_optimizer_fit_refuses_a_program_without_a_learned_part_in_one_line():
    with pytest.raises(Exception) as err:
        FitLearned().compile(dspy.Module(), trainset=[])
    assert "no learned part to fit" in str(err.value) and "\n" not in str(err.value)


def shipped_check(*overrides: str):
    return grounding_check("learned", *overrides)


def test_a_flagged_sentence_says_how_it_fails_and_which_note_sentence_it_conflicts_with():
    check = shipped_check()
    note = [NoteSentence("1", "CT of the head showed a small bleed on the left side of the brain."),
            NoteSentence("2", "Warfarin was stopped and will restart on day 14.")]
    pred = check([{"id": "1", "text": "The scan showed a small bleed on the right side of his brain."},
                  {"id": "2", "text": "His blood thinner was stopped and restarts on day 14."}],
                 [{"answer_id": "1", "evidence_id": ["1"]}, {"answer_id": "2", "evidence_id": ["2"]}], note, "x")
    by_id = {v["answer_id"]: v for v in pred.verdicts}
    assert {v["verdict"] for v in pred.verdicts} <= {SUPPORTED, CONTRADICTED, NOT_IN_NOTE}
    for v in pred.verdicts:
        found = v["verifier"]
        assert 0.0 <= found["probability"] <= 1.0 and found["threshold"] > 0
        if found["verdict"] != SUPPORTED:
            assert found["conflict_id"] in {"1", "2"} and found["kind"] and v["verdict"] == found["verdict"]
    assert by_id["1"]["verifier"]["probability"] > by_id["2"]["verifier"]["probability"]


def test_report_html_marks_a_flagged_sentence_and_quotes_the_note_sentence_beside_it():
    case = Case("c1", "n", sentences=(NoteSentence("1", "Left <b>knee</b> effusion."),))
    record = {"answer": "x", "alignment_source": "generated",
              "answer_sentences": [{"id": "1", "text": "The right knee is swollen."}],
              "alignment": [{"answer_id": "1", "evidence_id": ["1"]}],
              "grounding": [{"answer_id": "1", "text": "The right knee is swollen.", "verdict": CONTRADICTED,
                             "reasons": ["verifier: contradicted (p=0.99, side/site)"],
                             "verifier": {"verdict": CONTRADICTED, "probability": 0.99, "kind": "side/site",
                                          "conflict_id": "1", "conflict_text": "Left <b>knee</b> effusion."}}]}
    html = _answer(case, record)
    assert 'class="unsupported"' in html and "<strong><bdi>contradicted</bdi>:</strong>" in html
    assert "conflicts with note sentence" in html and "side/site" in html
    assert "&lt;b&gt;knee&lt;/b&gt;" in html and "<b>knee</b>" not in html


def test_the_shipped_verifier_adds_flags_to_the_rules_on_the_validation_fabrications():
    """Validation numbers (the threshold was chosen on these reference sentences): a regression guard that the
    shipped weights load and act, not a claim about unseen text (benchmarks/README.md has the measurement)."""
    from tasks.archehr.fabrications import answers, load, load_fabrications, score

    cases, key = load([str(DATA / "dev_cases.xml"), str(DATA / "bundled_cases.xml")],
                      [str(DATA / "dev_cases_key.json"), str(DATA / "bundled_cases_key.json")])
    made = load_fabrications(ROOT / "benchmarks" / "fabrications_subtle.json", cases)
    sides = {case_id: [f for f in found if f.kind == "wrong side"] for case_id, found in made.items()}
    items = answers(cases, key, random.Random(0), {k: v for k, v in sides.items() if v})  # 9 cases, 9 wrong sides
    rules = score(grounding_check("claims"), items)
    both = score(shipped_check(), items)
    assert rules.tp == 0 and both.tp >= 2 and both.false_flag_rate <= 0.1  # the rules' blind spot, partly covered
    assert json.loads(SHIPPED.read_text())["_grounding.verifier.weights"]["format"] == "clinprog-verifier/1"


def test_a_verifier_fitted_with_another_embedder_is_refused_in_one_line():
    check = shipped_check()
    other = copy.deepcopy(check.verifier.weights)
    other.encoder = "some/other-model"
    check.verifier.weights = other
    with pytest.raises(Exception, match="fitted with embedder 'some/other-model'") as err:
        check.verifier(answer_sentence="x", note_sentences=[NoteSentence("1", "y")])
    assert "\n" not in str(err.value)
    assert config("program=archehr", "program/archehr/grounding=learned").program.grounding.rules is True
