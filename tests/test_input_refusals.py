"""Issue #54 (a hostile probe of the page, the API and the new settings), the parts without a server or a browser:
text that is not Unicode, a builder's ConfigError inside Hydra's instantiate, report.html from a hand-edited
predictions.jsonl (both programs), the request schema's one source per request, a folder or key-less cases as
training data, the judge's setting under the default grounding, the command saved in run.lock. The served API's
side: tests/test_serve.py and tests/test_serve_abuse.py; the page and report.html in Chromium: tests/test_page.py and
tests/test_report_browser.py."""

from __future__ import annotations

import json
import shutil

import pytest
from omegaconf import OmegaConf
from pydantic import ValidationError

from common.config_groups import compose_config
from common.errors import ClinprogError, ConfigError
from common.unicode_text import InvalidUnicode, require_unicode, unicode_problem
from tasks.archehr.data import ArchEHRDataError, load_cases, load_question_pairs
from tests.cli import composition_error, dispatch_run, one_error_line
from tests.conftest import BUNDLED_CASES, ROOT

pytestmark = pytest.mark.unit



# --- 1: text that is not Unicode -------------------------------------------------------------------------------------
def test_a_lone_surrogate_is_found_and_named_by_its_path():
    body = json.loads('{"case_id": "c", "sentences": [{"id": "1", "text": "ok"}, {"id": "2", "text": "why \\ud800?"}]}')
    assert unicode_problem(body) == ("sentences.1.text: a lone surrogate U+D800 at character 4 is not Unicode text "
                                     "(a \\ud800-\\udfff escape must be one half of a pair); send UTF-8 text")
    assert unicode_problem(json.loads('{"a\\udfff": 1}')).startswith("body: a key with a lone surrogate U+DFFF")
    # a pair of escapes is one character outside the BMP: Unicode text
    assert unicode_problem(json.loads('{"t": "\\ud83d\\ude00 fine", "n": [1, null, {"x": "caf\\u00e9"}]}')) is None
    with pytest.raises(InvalidUnicode, match=r"^cases.xml:3: a lone surrogate U\+DC00") as refused:
        require_unicode("x\udc00", "cases.xml:3")
    assert isinstance(refused.value, ClinprogError) and isinstance(refused.value, ValueError)
    message = str(refused.value)
    message.encode("utf-8")  # the refusal itself holds no surrogate: it can be printed and sent as JSON


def test_a_lone_surrogate_in_a_training_file_is_one_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"id": "1", "question": "a?", "summary": "b?"}\n'
                    '{"id": "2", "question": "why \\ud800 stopped?", "summary": "d?"}\n', encoding="utf-8")
    with pytest.raises(InvalidUnicode, match=r"pairs.jsonl:2.1: a lone surrogate U\+D800 at character 4"):
        load_question_pairs(path)


@pytest.mark.parametrize("payload", [b"why &#xD800; stopped?", b"why \xed\xa0\x80 stopped?"])
def test_a_case_file_cannot_carry_a_surrogate_and_says_so_in_one_line(tmp_path, payload):
    """XML refuses a surrogate as a character reference and UTF-8 refuses one encoded: the batch CLI's one line."""
    text = BUNDLED_CASES.read_bytes()
    start = text.index(b"<patient_narrative>") + len(b"<patient_narrative>")
    path = tmp_path / "cases.xml"
    path.write_bytes(text[:start] + payload + text[start:])
    run = dispatch_run(f"data.cases={path}", "data.key=null", f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert "malformed XML" in one_error_line(run)


# --- 2: a ConfigError inside Hydra's instantiate ---------------------------------------------------------------------
@pytest.mark.parametrize(("value", "shown"), [("0", "0"), ("lots", "'lots'")])
def test_a_builder_config_error_inside_instantiate_is_one_line(tmp_path, value, shown):
    run = dispatch_run("program=archehr", f"program.embedder.threads={value}", "data.limit=1",
                       f"hydra.run.dir={tmp_path}", quiet=True)
    assert one_error_line(run) == f"error: program.embedder.threads must be an integer from 1 to 256 (or auto), not {shown}"
    assert "InstantiationException" not in run.stdout + run.stderr


def test_an_unexpected_error_inside_instantiate_is_still_a_traceback():
    """Only a ClinprogError is unwrapped: a bug inside a builder keeps Hydra's exception (and its traceback)."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    from common.errors import through_instantiate

    with pytest.raises(InstantiationException), through_instantiate():
        instantiate({"_target_": "json.loads", "s": 5})


# --- 3: report.html from a hand-edited predictions.jsonl ------------------------------------------------------------
def archehr_run_folder(tmp_path, records: list[dict]) -> None:
    cfg = compose_config("program=archehr", f"data.cases={BUNDLED_CASES}")
    (tmp_path / "config.json").write_text(json.dumps(OmegaConf.to_container(cfg, resolve=True)))
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    from programs.archehr.contract import ArchEHRContract

    (tmp_path / "usage.json").write_text(json.dumps(ArchEHRContract().usage([])))  # as a finished run has it


def test_task_report_reads_the_issues_hand_edited_predictions_file(tmp_path):
    """The issue's replay: `"seconds": "abc"` and a grounding entry without its `text`, through `task=report`."""
    first = load_cases(BUNDLED_CASES)[0]
    sid = first.sentences[0].id
    record = {"case_id": first.case_id, "clinician_question": "Why?", "evidence_ids": [sid], "answer": "An answer.",
              "seconds": "abc", "alignment": [{"answer_id": "1", "evidence_id": [sid]}], "alignment_source": "generated",
              "answer_sentences": [{"id": "1", "text": "An answer."}], "fallbacks": {},
              "grounding": [{"answer_id": "2", "verdict": "contradicted", "reasons": ["r"]}]}  # no "text"
    archehr_run_folder(tmp_path, [record])
    run = dispatch_run("task=report", f"dir={tmp_path}", f"hydra.run.dir={tmp_path / 'hydra'}", quiet=True)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    html = (tmp_path / "report.html").read_text()
    assert html.count('<section class="case"') == 1 and "? s" in html and "<bdi>An answer.</bdi>" in html


def test_report_html_reads_any_odd_value_of_an_archehr_record():
    from programs.archehr.report_html import render

    cases = load_cases(BUNDLED_CASES)[:3]
    sid = cases[0].sentences[0].id
    records = [
        {"case_id": cases[0].case_id, "clinician_question": "Why?", "evidence_ids": [sid], "answer": "An answer.",
         "seconds": "abc", "alignment": [{"answer_id": "1", "evidence_id": [sid]}, "x"], "alignment_source": "generated",
         "answer_sentences": [{"id": 1}, None], "grounding": [{"answer_id": "1", "verdict": 3, "reasons": "r"}],
         "fallbacks": {"question": "x"}, "scores": {sid: "five"}},
        {"case_id": cases[1].case_id, "clinician_question": ["not", "text"], "evidence_ids": "1,2", "answer": 5,
         "seconds": None, "alignment": "none", "grounding": [7, {"verdict": None}], "fallbacks": 5, "scores": [],
         "question_candidates": {"odd": True}},
        {"case_id": cases[2].case_id, "answer": None, "seconds": float("inf")},
    ]
    usage = {"cases": "three", "seconds_per_case": "x", "lm_calls_per_case": [], "stages": {"q": {"seconds": "a"},
                                                                                             "e": 3}}
    html = render(compose_config("program=archehr"), cases, None, records, usage, {"subtask_1": "odd"})
    assert html.count('<section class="case"') == 3 and html.count("? s") == 4  # 3 cases and the summary


def test_report_reads_a_hand_edited_mediqa_record(dummy_lm):
    from programs.mediqa_corr.report_html import render
    from tasks.mediqa_corr.data import load_notes

    notes = load_notes(ROOT / "data/mediqa_corr/MEDEC-MS-ValidationSet-with-GroundTruth-and-ErrorType.csv", 2)
    records = [{"text_id": notes[0].text_id, "flag": "1", "sentence_id": "x", "seconds": "abc", "lm_calls": None,
                "episodes": [{"steps": ["old text", 5, {"action": "search", "passages": "p"}], "proposal": [3],
                              "reviews": [{"score": 2}, "odd"]}], "usage": {"react": "x"}},
               {"text_id": notes[1].text_id, "flag": 0, "sentence_id": -1, "corrected": "", "outcome": "no_error",
                "line": "l", "seconds": 1.5, "lm_calls": 2, "react_steps": 1, "searches": 0, "parse_failures": 0}]
    html = render(compose_config("program=mediqa_corr"), notes, records, {"seconds_per_note": "?"}, None)
    assert html.count('<section class="case"') == 2 and "? s" in html and "1.5 s" in html


# --- 5: one source per request ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [{"patient_narrative": "Why?"}, {"note": "Lisinopril was held."},
                                   {"sentences": [{"id": "1", "text": "x"}]}, {"case_id": "mine"}])
def test_xml_and_fields_of_another_case_together_are_refused(extra):
    from programs.archehr.serve_schemas import ArchEHRRequest

    with pytest.raises(ValidationError, match="give the case as xml or as fields, not both"):
        ArchEHRRequest(xml=BUNDLED_CASES.read_text(), **extra)
    assert ArchEHRRequest(xml="<annotations/>").xml  # xml alone is one source


# --- 6: the smaller ones ---------------------------------------------------------------------------------------------
def test_the_judge_under_the_default_grounding_names_the_options_that_have_it():
    assert composition_error("program=archehr", "program.grounding.judge=lm") == (
        "error: program.grounding.judge: not a setting of program/archehr/grounding=none (the grounding stage in use); "
        "its settings: none; it belongs to claims, reader, similarity: add program/archehr/grounding=claims")


def test_a_folder_as_training_data_says_it_is_a_folder(tmp_path):
    for load in (load_cases, load_question_pairs):
        with pytest.raises(ArchEHRDataError, match="a folder, not a"):
            load(tmp_path)
    run = dispatch_run("task=compile", "experiment=compile_heads", f"data.train={tmp_path}",
                       f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert one_error_line(run) == f"error: {tmp_path}: a folder, not a cases file (name the XML file itself)"


@pytest.mark.parametrize(("experiment", "message"), [
    ("compile_reader_verifier", "the verifier's training cases have no reference answer sentences"),
    ("compile_heads", "no training case has a note and a key"),
])
def test_training_cases_without_a_key_are_refused_before_validation_is_scored(tmp_path, experiment, message):
    shutil.copy(ROOT / "data/archehr/realistic_cases_a.xml", tmp_path / "cases.xml")  # its key is not beside it
    smollm2 = ["program.grounding.verifier.reader.model=smollm2"] if experiment == "compile_reader_verifier" else []
    run = dispatch_run("task=compile", f"experiment={experiment}", f"data.train=[{tmp_path / 'cases.xml'}]", *smollm2,
                       f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert message in one_error_line(run)
    assert "validation examples before" not in run.stdout  # refused before any scoring


def test_a_json_lines_file_that_is_not_question_pairs_says_which_format_data_train_takes(tmp_path):
    other = tmp_path / "cases.jsonl"  # another JSON-lines format: the loader says which one data.train takes
    other.write_text('{"case_id": "1", "patient_narrative": "Why?"}\n')
    with pytest.raises(ArchEHRDataError, match="question pairs, which train the question stage only"):
        load_question_pairs(other)


def test_the_command_in_run_lock_is_never_cut_mid_argument():
    from common.run_folder import command_line

    args = [b"/usr/bin/python3", b"main.py", b"data.cases=/data/" + b"c" * 200 + b".xml", b"data.key=/k/key.json",
            b"hydra.run.dir=/runs/" + b"r" * 150, b"name=two words"]
    line = command_line(b"\0".join(args) + b"\0")
    assert line == ("/usr/bin/python3 main.py data.cases=/data/" + "c" * 200 + ".xml data.key=/k/key.json"
                    " ... (2 more arguments)")
    assert command_line(b"python\0main.py\0name=two words\0") == "python main.py 'name=two words'"


@pytest.mark.parametrize(("overrides", "key", "target"), [
    (["lm=embedded", "+lm.client.chat_format=chatml"], "lm.client.chat_format", "lms.factory.embedded_lm"),
    (["lm=gemini", "+lm.client.chat_format=chatml"], "lm.client.chat_format", "lms.factory.gemini_lm"),
    (["tracking=mlflow", "+tracking.bogus=1"], "tracking.bogus", "common.tracking.MlflowTracking"),
    (["+program.embedder.bogus=1"], "program.embedder.bogus", "retrieval.embed.Embedder"),
    (["task=compile", "optimizer=bootstrap", "lm=embedded", "+optimizer.teleprompter.bogus=1"],
     "optimizer.teleprompter.bogus", "dspy.teleprompt.bootstrap.BootstrapFewShot"),
])
def test_a_key_the_built_class_does_not_take_is_one_line_naming_its_settings(tmp_path, overrides, key, target):
    run = dispatch_run("program=archehr", *overrides, "data.limit=1", f"hydra.run.dir={tmp_path}", quiet=True)
    assert one_error_line(run).startswith(f"error: {key}: not a setting of {target}; its settings: ")


def test_a_type_error_inside_a_builder_is_not_taken_for_an_unknown_key():
    from hydra.errors import InstantiationException

    from common.errors import through_instantiate

    def inner(a: int) -> int:
        return a

    def builder(a: int = 0) -> int:
        return inner(a=a, b=1)  # a bug inside the target, not the user's key

    def call(**kwargs):  # as Hydra calls a target and wraps what it raises
        try:
            return builder(**kwargs)
        except TypeError as exc:
            raise InstantiationException("Error in call to target 'x.builder':\nfull_key: tracking") from exc

    with pytest.raises(ConfigError, match=r"^tracking\.bogus: not a setting of x\.builder$"), through_instantiate():
        call(bogus=1)
    with pytest.raises(InstantiationException), through_instantiate():
        call(a=1)


@pytest.mark.parametrize(("override", "message"), [
    ("program.eval.avg_threshold=abc", "program.eval.avg_threshold must be a number in [1, 5] (a review scores 1-5), "
                                       "not 'abc'"),
    ("program.eval.avg_threshold=9", "program.eval.avg_threshold must be a number in [1, 5]"),  # nothing could pass
    ("program.react.max_steps=0", "program.react.max_steps must be an integer >= 1, not 0"),
    ("program.reflexion.max_episodes=0", "program.reflexion.max_episodes must be an integer >= 1, not 0"),
])
def test_a_mediqa_corr_loop_setting_that_cannot_work_is_one_line_before_any_note(tmp_path, override, message):
    run = dispatch_run("program=mediqa_corr", "lm=embedded", "program.search.enabled=false", "data.limit=1", override,
                       f"hydra.run.dir={tmp_path}", quiet=True)
    assert one_error_line(run).startswith(f"error: {message}")
