"""The LM path's output shapes with a scripted DummyLM (issue 51): the evidence and alignment forms, degenerate
replies counted and shown, the agent's bounded history, and a model shipped in parts joined and hash-checked."""

import hashlib
import json

import pytest

from common.errors import ConfigError
from common.usage import UsageLedger
from lms.errors import LMConfigError
from programs.archehr.report import usage_summary
from programs.mediqa_corr.react import Episode, Step
from tasks.archehr.data import AnswerSentence, NoteSentence
from tests.builders import archehr_stage

pytestmark = pytest.mark.unit

SENTS = [NoteSentence(str(i), f"sentence {i}.") for i in range(1, 6)]
ANSWER = [AnswerSentence("1", "first answer."), AnswerSentence("2", "second answer.")]


def prompt_of(lm, i=-1) -> str:
    return "\n".join(m["content"] for m in lm.history[i]["messages"])


def test_a_list_that_scores_every_sentence_the_same_is_degenerate_not_a_success(dummy_lm):
    dummy_lm([{"scores": [5, 5, 5, 5, 5]}])
    out = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.fallback is None and out.degenerate == "every one of 5 sentences scored 5"
    assert out.selection == "strict" and out.evidence_ids == ["1", "2", "3", "4", "5"]  # the seed's rule still selects


def test_scores_that_differ_are_not_degenerate(dummy_lm):
    dummy_lm([{"scores": [5, 1, 1, 1, 1]}])
    out = archehr_stage("evidence", "lm")(clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.degenerate is None and out.evidence_ids == ["1"]


def test_per_sentence_form_rates_each_sentence_in_its_own_call_with_the_note_before_it(dummy_lm):
    lm = dummy_lm([{"score": v} for v in (2, 5, 1, 4, 3)])
    out = archehr_stage("evidence", "lm", "program.evidence.form=per_sentence")(
        clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.scores == {"1": 2, "2": 5, "3": 1, "4": 4, "5": 3} and out.evidence_ids == ["2", "4"]
    assert len(lm.history) == 5
    third = lm.history[2]["messages"][-1]["content"]
    # the whole note, then the one sentence rated last (the frame an engine with prefix_reuse reads once)
    assert third.index("[5] sentence 5.") < third.rindex("[3] sentence 3.")
    assert third.rindex("[[ ## sentence ## ]]") > third.index("[[ ## note_sentences ## ]]")


def test_per_sentence_form_out_of_range_falls_back_and_group_size_is_refused(dummy_lm):
    dummy_lm([{"score": 9}] * 10)
    out = archehr_stage("evidence", "lm", "program.evidence.form=per_sentence")(
        clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.selection == "fallback_first_n" and out.fallback
    with pytest.raises(ConfigError, match="group_size applies to the list and by_id forms"):
        archehr_stage("evidence", "lm", "program.evidence.form=per_sentence", "program.evidence.group_size=2")
    with pytest.raises(ConfigError, match="program.evidence.form must be one of list, by_id, per_sentence"):
        archehr_stage("evidence", "lm", "program.evidence.form=each")


def test_by_id_form_reads_scores_by_id(dummy_lm):
    dummy_lm([{"scores": {"[1]": 1, "2": 4, "3": 1, "4": 1, "5": 5}}])
    out = archehr_stage("evidence", "lm", "program.evidence.form=by_id")(
        clinician_question="q", patient_narrative="", sentences=SENTS)
    assert out.evidence_ids == ["2", "5"] and out.degenerate is None


def test_an_alignment_that_cites_nothing_for_every_answer_sentence_is_flagged(dummy_lm):
    dummy_lm([{"citations": [[], []]}])
    out = archehr_stage("alignment", "lm")(answer_sentences=ANSWER, sentences=SENTS)
    assert out.fallback is None and out.degenerate == "no citation for any of 2 answer sentences"
    dummy_lm([{"citations": [["1"], []]}])
    assert archehr_stage("alignment", "lm")(answer_sentences=ANSWER, sentences=SENTS).degenerate is None


def test_per_sentence_alignment_asks_once_per_answer_sentence_with_the_note_first(dummy_lm):
    lm = dummy_lm([{"citations": ["2", "9"]}, {"citations": ["4"]}])
    out = archehr_stage("alignment", "lm", "program.alignment.form=per_sentence")(answer_sentences=ANSWER,
                                                                                  sentences=SENTS)
    assert out.alignment == [{"answer_id": "1", "evidence_id": ["2"]}, {"answer_id": "2", "evidence_id": ["4"]}]
    assert out.dropped_ids == 1 and len(lm.history) == 2
    last = lm.history[1]["messages"][-1]["content"]
    assert last.index("[[ ## note_sentences ## ]]") < last.index("[[ ## answer_sentence ## ]]")
    assert "second answer." in last and "first answer." not in last


def test_the_cascade_counts_a_degenerate_stage_in_usage_and_the_report_summary(dummy_lm):
    ledger = UsageLedger()
    ledger.degenerate("evidence", "every one of 5 sentences scored 1")
    assert ledger.degenerates() == {"evidence": "every one of 5 sentences scored 1"}
    records = [{"case_id": str(i), "clinician_question": "Why?", "answer": f"a{i}",
                "usage": {"evidence": {"lm_calls": 1}, "alignment": {"lm_calls": 1}},
                "fallbacks": {}, "degenerate": {"evidence": "all 1"} if i < 3 else {}} for i in range(4)]
    summary = usage_summary(records, ("evidence", "alignment"))
    assert summary["degenerate"]["evidence"] == 3
    assert summary["degenerate"]["clinician_question_repeated"] == 4  # the same question for 4 different cases
    assert summary["useful_rate"] == {"evidence": 0.25, "alignment": 1.0}
    assert summary["parse_success_rate"]["evidence"] == 1.0  # parsed: the degenerate count is what says otherwise


def test_the_agents_history_keeps_to_its_budget_oldest_results_first():
    def step(n, action="search"):
        return Step(n=n, observation=f"obs {n}", thought=f"thought {n}", action=action, query=f"query {n}",
                    results="R" * 2000, parsed=True)

    episode = Episode()
    episode.steps = [step(1), step(2), step(3)]
    whole = episode.history()
    assert whole.count("R" * 2000) == 3
    bounded = episode.history(budget_tokens=700)  # 2,800 characters: two result blocks must go
    assert bounded.count("R" * 2000) == 1 and bounded.count("left out: history budget") == 2
    assert bounded.rstrip().endswith("R" * 2000)  # the newest step stays whole
    tight = episode.history(budget_tokens=520)
    assert "Step 1: search(query 1) (observation and thought left out" in tight
    assert len(tight) < len(bounded) and "R" * 2000 in tight


def test_history_tokens_must_be_a_positive_whole_number():
    from programs.mediqa_corr.react import MedReAct

    with pytest.raises(ConfigError, match=r"^program.react.history_tokens must be an integer >= 1 or null, not 0$"):
        MedReAct(max_steps=2, history_tokens=0)


def fake_parts(tmp_path, monkeypatch, n=3, size=1000):
    """A parted model of `n` fake packages under tmp_path; returns (model, the whole file's bytes)."""
    from lms import model_parts

    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    chunks = [data[i * size // n:(i + 1) * size // n] for i in range(n)]
    folders = {}
    for i, chunk in enumerate(chunks, 1):
        folder = tmp_path / "site" / f"fake_part{i}"
        (folder / "data").mkdir(parents=True)
        (folder / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        folders[f"fake_part{i}"] = folder
    model = model_parts.PartedModel(name="fake.gguf", package_prefix="fake_part", parts=n, size=size,
                                    sha256=hashlib.sha256(data).hexdigest(), extra="fake")

    def package_folder(name):
        if name not in folders or not folders[name].exists():
            raise model_parts.ModelPackageError(name)
        return folders[name]

    monkeypatch.setattr(model_parts, "package_folder", package_folder)
    monkeypatch.setattr(model_parts, "_CHECKED", {})
    return model, data, folders


def test_a_parted_model_is_joined_once_and_checked_by_hash(tmp_path, monkeypatch):
    from lms.model_parts import joined_model

    model, data, _ = fake_parts(tmp_path, monkeypatch)
    path = joined_model(model, cache=tmp_path / "cache")
    assert path.read_bytes() == data and [p.name for p in path.parent.iterdir()] == ["fake.gguf"]


def test_a_missing_part_or_a_changed_file_is_one_line_naming_the_package(tmp_path, monkeypatch):
    import shutil

    from lms import model_parts

    model, _, folders = fake_parts(tmp_path, monkeypatch)
    shutil.rmtree(folders["fake_part2"])
    with pytest.raises(LMConfigError, match=r"fake-part2 is not installed .*\.\[fake\]"):
        model_parts.joined_model(model, cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / "fake.gguf").exists()  # nothing written before every part is there

    model, _, folders = fake_parts(tmp_path / "again", monkeypatch)
    (folders["fake_part3"] / "data" / "part03.bin").write_bytes(b"x" * 333)  # same size, other bytes
    with pytest.raises(LMConfigError, match="sha256 .* is not the release's"):
        model_parts.joined_model(model, cache=tmp_path / "cache2")
    assert not (tmp_path / "cache2" / "fake.gguf").exists()  # the next run joins again


def test_the_qwen_option_composes_to_the_parted_model():
    from tests.builders import config

    cfg = config("program=archehr", "lm=embedded_qwen")
    assert cfg.lm.client.parted_model == "qwen2.5-coder-1.5b-instruct" and cfg.lm.client.package is None
    from lms.model_parts import PARTED_MODELS, QWEN_CODER_1_5B

    assert PARTED_MODELS[cfg.lm.client.parted_model] is QWEN_CODER_1_5B
    extras = json.dumps(QWEN_CODER_1_5B.__dict__)
    assert "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046" in extras


def test_ids_at_both_ends_of_each_note_line_and_candidates_bound_what_a_reply_may_cite(dummy_lm):
    lm = dummy_lm([{"citations": ["3"]}, {"citations": ["1"]}])
    stage = archehr_stage("alignment", "lm", "program.alignment.form=per_sentence",
                          "program.alignment.cite_by=id_both_ends")
    out = stage(answer_sentences=ANSWER, sentences=SENTS)
    assert [a["evidence_id"] for a in out.alignment] == [["3"], ["1"]]
    assert "[2] sentence 2. [2]" in lm.history[0]["messages"][-1]["content"]
    with pytest.raises(ConfigError, match="cite_by=id_both_ends needs program.alignment.form=per_sentence"):
        archehr_stage("alignment", "lm", "program.alignment.cite_by=id_both_ends")
    with pytest.raises(ConfigError, match="candidates needs program.alignment.form=per_sentence"):
        archehr_stage("alignment", "lm", "program.alignment.candidates=2")

    note = [NoteSentence("1", "HOSPITAL COURSE:"), NoteSentence("2", "Furosemide was increased to 80 mg daily."),
            NoteSentence("3", "The patient enjoys gardening."), NoteSentence("4", "Creatinine rose to 1.4.")]
    stage = archehr_stage("alignment", "lm", "program.alignment.form=per_sentence", "program.alignment.candidates=2")
    allowed = stage._allowed([AnswerSentence("1", "His furosemide dose was raised to 80 mg.")], note)
    assert allowed == [["2", "4"]] or allowed == [["2", "3"]]  # the header is never a candidate
    assert "2" in allowed[0]


def test_the_small_lm_forms_experiment_sets_per_sentence_forms_and_prefix_reuse():
    from tests.builders import config

    cfg = config("program=archehr", "lm=embedded_qwen", "experiment=small_lm_forms")
    assert cfg.program.evidence.form == "per_sentence" and cfg.program.alignment.form == "per_sentence"
    assert cfg.program.alignment.cite_by == "id_both_ends" and cfg.lm.client.prefix_reuse is True
    seed = config("program=archehr", "lm=embedded_qwen")  # without the experiment: the seed's one-call forms
    assert seed.program.evidence.form == "list" and seed.program.alignment.form == "lists"
