"""Compiles that cannot go quietly wrong (issue #20): the instruction guard, the train/val overlap warning and the
before/after compile report, without an LM (fake optimizer results and a DummyLM)."""

import dataclasses
import json

import dspy
import pytest

import runners.compile as compile_runner
from common.contract import contract_for
from common.errors import ConfigError
from common.html import esc
from optimizers.instruction_guard import GuardLimits, example_inputs, guard_instructions, judge, snapshot, words
from optimizers.split_overlap import split_overlap
from reports import compile_report
from signatures.constrained import ConstrainedJSONAdapter
from tests.builders import config, program
from tests.conftest import BUNDLED_CASES, DEV_QUESTIONS

pytestmark = pytest.mark.unit

QUESTION = "question.interpret"
REWRITE = ("Read the patient's message and find the one clinical question it asks about the hospital stay. Rewrite "
           "it as a clinician would, in the third person, with the patient as its subject, in at most 15 words, "
           "ending with a question mark. Leave out thanks, greetings and background the question does not need.")


def limits(*overrides: str) -> GuardLimits:
    """The shipped limits (conf/optimizer/guard/default.yaml), as every optimizer config composes them."""
    return GuardLimits.from_config(config("optimizer=gepa", *overrides).optimizer.guard)


def dev_pairs(path=DEV_QUESTIONS):
    cfg = config("program=archehr", f"data.cases={path}")
    return contract_for(cfg), contract_for(cfg).examples(cfg, "train")


class FakeOptimizer:
    """An optimizer result without an LM: a copy of the student with the given instructions set."""

    def __init__(self, instructions: dict[str, str]):
        self.instructions = instructions

    def compile(self, student, trainset, valset=None):
        compiled = student.deepcopy()  # as optimizers copy (shared resources such as the embedder stay shared)
        for name, pred in compiled.named_predictors():
            if name in self.instructions:
                pred.signature = pred.signature.with_instructions(self.instructions[name])
        return compiled


@pytest.mark.parametrize("name", ["none", "bootstrap", "bootstrap_rs", "mipro", "gepa"])
def test_every_optimizer_config_carries_the_guard_limits(name):
    guard = GuardLimits.from_config(config(f"optimizer={name}").optimizer.guard)
    assert guard.enabled and guard.max_growth == 4.0 and guard.max_words == 300


@pytest.mark.parametrize(("rule", "before", "after", "adopted"), [
    ("not_worse", 0.5, 0.4, False), ("not_worse", 0.5, 0.5, True), ("improves", 0.5, 0.5, False),
    ("improves", 0.5, 0.6, True), ("always", 0.5, 0.1, True), ("improves", float("nan"), 0.1, True)])
def test_a_compiled_program_replaces_the_saved_state_only_as_adopt_if_says(tmp_path, monkeypatch, rule, before,
                                                                           after, adopted):
    """optimizer.guard.adopt_if against the validation score before and after (NaN before: a learned stage compiled
    from scratch has nothing to compare with); a refused compile keeps the earlier state and says why in one line."""
    from common.errors import ClinprogError

    contract, examples = dev_pairs()
    saved = tmp_path / "saved.json"
    saved.write_text('{"earlier": "state"}')
    cfg = config("program=archehr", f"data.cases={DEV_QUESTIONS}", "optimizer=bootstrap",
                 f"optimizer.guard.adopt_if={rule}", f"program.optimize.save_to={saved}")
    student = program("archehr")
    monkeypatch.setattr(compile_runner, "build_optimizer", lambda *a: FakeOptimizer({}))
    monkeypatch.setattr(compile_runner, "output_dir", lambda: tmp_path)
    monkeypatch.setattr(compile_runner, "evaluate", lambda prog, valset, metric: before if prog is student else after)
    if adopted:
        compile_runner.compile_program(cfg, contract, student, examples[:2], examples[2:4])
        assert "earlier" not in saved.read_text()
        return
    with pytest.raises(ClinprogError, match=f"compiled program was not adopted .*adopt_if={rule}.* is unchanged"):
        compile_runner.compile_program(cfg, contract, student, examples[:2], examples[2:4])
    assert saved.read_text() == '{"earlier": "state"}' and (tmp_path / "compiled_program.json").is_file()
    report = json.loads((tmp_path / "compile_report.json").read_text())
    assert report["saved"] is None and report["adoption"]["rule"] == rule and report["adoption"]["refused"]
    assert "**Not adopted**" in (tmp_path / "compile_report.md").read_text()
    page = (tmp_path / "compile_report.html").read_text()
    assert '<p class="bad"><strong>Not adopted</strong>: ' in page and "<h2>Saved</h2><p>nothing (not adopted)</p>" in page


def test_adopt_if_takes_one_of_three_rules():
    with pytest.raises(ConfigError, match=r"optimizer.guard.adopt_if must be one of \['improves', 'not_worse', "
                                          r"'always'\], not 'sometimes'"):
        limits("optimizer.guard.adopt_if=sometimes")


def test_a_missing_or_misspelt_guard_key_is_one_config_error():
    cfg = config("optimizer=gepa").optimizer.guard
    with pytest.raises(ConfigError, match=r"missing \['max_words'\], unknown \['max_word'\]"):
        GuardLimits.from_config({**{k: v for k, v in cfg.items() if k != "max_words"}, "max_word": 3})


def test_the_issue_case_a_narrative_repeated_ten_times_is_rejected_and_the_original_kept():
    contract, examples = dev_pairs()
    narrative = examples[0].case.patient_narrative.strip()
    student = program("archehr")
    original = dict(student.named_predictors())[QUESTION].signature.instructions
    before = snapshot(student, contract.item_id)
    compiled = FakeOptimizer({QUESTION: " ".join([narrative] * 10)}).compile(student, examples)

    reviews = guard_instructions(compiled, before, example_inputs(examples, contract.item_id), limits(),
                                 contract.item_id)
    review = next(r for r in reviews if r.name == QUESTION)
    assert not review.verdict.adopted
    assert dict(compiled.named_predictors())[QUESTION].signature.instructions == original
    reasons = " | ".join(review.verdict.reasons)
    assert "repeats itself" in reasons and "copies an input" in reasons and "case 1's input" in reasons
    # the other predictors were not touched by the fake optimizer: unchanged, adopted as they are
    assert all(r.verdict.adopted and r.verdict.label == "unchanged" for r in reviews if r is not review)


def test_a_reasonable_rewritten_instruction_is_adopted():
    contract, examples = dev_pairs()
    student = program("archehr")
    before = snapshot(student, contract.item_id)
    compiled = FakeOptimizer({QUESTION: REWRITE}).compile(student, examples)
    reviews = guard_instructions(compiled, before, example_inputs(examples, contract.item_id), limits(),
                                 contract.item_id)
    assert next(r for r in reviews if r.name == QUESTION).verdict.adopted
    assert dict(compiled.named_predictors())[QUESTION].signature.instructions == REWRITE


def test_a_sentence_repeated_is_flagged_even_when_it_copies_nothing():
    text = "Always state the question about the patient clearly and briefly. " * 8
    verdict = judge(text, "Rewrite the question.", [], limits())
    assert not verdict.adopted and all(r.startswith("repeats itself") for r in verdict.reasons)
    assert len(verdict.reasons) == 2  # the distinct 6-gram share and the compression ratio both fall


def test_growth_needs_both_limits():
    original = "Rewrite the question as a clinician would."  # 7 words
    _, examples = dev_pairs()
    prose = " ".join(ex.case.patient_narrative for ex in examples)  # varied text: it neither repeats nor compresses
    long_text = " ".join(prose.split()[:360])
    n = len(words(long_text))
    assert n > 300
    grown = judge(long_text, original, [], limits())
    assert not grown.adopted and grown.reasons == (f"grows too long: {n} words from 7 (limits: 4x the original and "
                                                  "300 words)",)
    # more than 4x the original but under 300 words, or over 300 words but under 4x: adopted
    assert judge(" ".join(prose.split()[:200]), original, [], limits()).adopted
    assert judge(long_text, " ".join(prose.split()[:100]), [], limits()).adopted


def test_copy_is_a_long_verbatim_run_not_a_shared_phrase_or_the_original_own_words():
    source = ("My father was admitted with chest pain and the doctors did an angiogram the same night although "
              "he had never had heart trouble before and his stress test last year was normal so we wonder why")
    inputs = [("case 7's input", source)]
    copied = judge("Use this example: " + source, "Rewrite the question.", inputs, limits())
    assert copied.reasons == ("copies an input: 36 consecutive words of case 7's input (at most 20 allowed)",)
    assert judge("Ask why the doctors did an angiogram the same night.", "Rewrite.", inputs, limits()).adopted
    # words already in the original instruction are not a copy, even when an input holds them too
    assert judge(source + " Be brief.", source, inputs, limits()).adopted
    # a copy that differs only in case and punctuation is still a copy
    assert not judge(source.upper().replace(" ", ", "), "Rewrite.", inputs, limits()).adopted


def test_guard_off_adopts_every_proposal():
    text = "the same words again " * 50
    assert judge(text, "x", [], limits("optimizer.guard.enabled=false")).adopted


def test_train_equal_to_val_is_named_with_its_overlap():
    contract, examples = dev_pairs()
    overlap = split_overlap(examples, examples, contract.item_id, DEV_QUESTIONS, str(DEV_QUESTIONS))
    assert overlap.same_file and overlap.same_content == 20 and overlap.same_id_only == 0
    assert overlap.message.startswith(f"warning: data.train and data.val are the same file ({DEV_QUESTIONS}): 20 of "
                                      "20 validation examples are also training examples")
    assert "data.val=" in overlap.message


def test_overlap_is_counted_across_files_and_disjoint_splits_pass():
    contract, examples = dev_pairs()
    train, val = examples[:12], examples[8:]
    overlap = split_overlap(train, val, contract.item_id, "a.xml", "b.xml")
    assert not overlap.same_file and overlap.same_content == 4
    assert "overlap: 4 of 12 validation examples" in overlap.message
    assert split_overlap(examples[:10], examples[10:], contract.item_id, "a.xml", "b.xml") is None
    # another release reusing case ids (the bundled cases are 901-903, so give two of them dev ids): said apart
    _, bundled = dev_pairs(BUNDLED_CASES)
    renamed = [dspy.Example(case=dataclasses.replace(ex.case, case_id=str(i + 1)), key=None, clinician_question=None)
               .with_inputs("case") for i, ex in enumerate(bundled[:2])]
    ids = split_overlap(examples, renamed, contract.item_id, "a.xml", "b.xml")
    assert (ids.same_content, ids.same_id_only) == (0, 2) and "(and 2 more share an id with one)" in ids.message
    # a program whose contract names no ids: only the same content counts
    assert split_overlap(examples, renamed, lambda item: None, "a.xml", "b.xml") is None


def test_compile_report_shows_before_after_verdicts_and_warning(tmp_path, monkeypatch):
    """task=compile end to end with a fake optimizer and a DummyLM: the junk instruction is not saved."""
    contract, examples = dev_pairs()
    narrative = examples[0].case.patient_narrative.strip()
    junk = " ".join([narrative] * 10)
    cfg = config("program=archehr", f"data.cases={DEV_QUESTIONS}", "optimizer=gepa",
                 "optimizer.metric=archehr_question", f"program.optimize.save_to={tmp_path / 'saved.json'}")
    fake = FakeOptimizer({QUESTION: junk, "answer.generate": REWRITE.replace("question", "answer")})
    monkeypatch.setattr(compile_runner, "build_optimizer", lambda *a: fake)
    monkeypatch.setattr(compile_runner, "output_dir", lambda: tmp_path)
    script = {"patient_narrative ##": {"clinician_question": "Why was ERCP recommended?"},
              "note_sentences ##": {"scores": [3]}, "evidence ##": {"answer": "ERCP was done."},
              "answer_sentences ##": {"citations": [["1"]]}}
    lm = dspy.utils.DummyLM(script, adapter=ConstrainedJSONAdapter())
    try:
        with dspy.context(lm=lm, adapter=ConstrainedJSONAdapter()):
            after = compile_runner.compile_program(cfg, contract, program("archehr"), examples, examples)
    finally:
        dspy.configure(lm=None, adapter=None)

    state = json.loads((tmp_path / "saved.json").read_text())
    assert junk not in json.dumps(state)  # the saved state never carries the rejected instruction
    assert "answer" in state["answer.generate"]["signature"]["instructions"]  # the reasonable one is kept
    meta = json.loads((tmp_path / "saved.json.meta.json").read_text())
    verdicts = {g["predictor"]: g["adopted"] for g in meta["instruction_guard"]}
    assert verdicts[QUESTION] is False and verdicts["answer.generate"] is True
    assert meta["train_val_overlap"].startswith("warning: data.train and data.val are the same file")
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["rejected_instructions"] == [QUESTION] and after == pytest.approx(scores["after"])

    md = (tmp_path / "compile_report.md").read_text()
    assert "**warning: data.train and data.val are the same file" in md
    assert f"### {QUESTION}: REJECTED\n\n- rejected: repeats itself: only 10% of its 6-word sequences" in md
    assert "- rejected: copies an input: 47 consecutive words of case 1's input (at most 20 allowed)" in md
    assert "Instruction proposed and rejected (" in md and "more characters]" in md  # truncated
    assert "Instruction after: the original, unchanged." in md
    assert "### answer.generate: adopted" in md and "Instruction after (adopted):" in md
    assert md.count("Demos before: 0") == 4 and "| before |" in md and "| after" in md
    page = (tmp_path / "compile_report.html").read_text()
    assert "<td><bdi>before</bdi></td>" in page and 'class="tag bad"' in page and "<ins" in page
    assert esc(junk) not in page and esc(narrative) in page and "more characters]" in page  # shown truncated


def test_report_shows_demos_before_and_after():
    report = {"program": "p", "optimizer": "bootstrap", "metric": "m", "train_size": 3, "val_size": 3,
              "scores": {"before": 0.1, "after": 0.2, "proposed": None}, "overlap_warning": None,
              "curated_demos": {}, "saved": "x.json", "optimizer_config": {},
              "predictors": [{"predictor": "a", "verdict": "unchanged", "adopted": True, "reasons": ["unchanged"],
                              "instruction_before": "Do it.", "instruction_proposed": "Do it.",
                              "instruction_after": "Do it.", "demos_before": [],
                              "demos_after": [{"case": "case 901", "answer": "Yes."}]}]}
    md = compile_report.markdown(report)
    assert "### a: instruction unchanged, demos 0 -> 1" in md  # not "unchanged": its demos changed
    assert "Demos before: 0\nDemos after: 1\n  1. case: case 901; answer: Yes." in md
    assert "| before | 0.1000 |\n| after | 0.2000 |" in md and "no instruction was changed" in md
    assert "<li>case: case 901; answer: Yes.</li>" in compile_report.html(report)
