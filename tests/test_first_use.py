"""What a newcomer meets first: where run folders go, what a failure leaves, which credentials are missing,
what a partial MEDIQA-CORR submission is scored against."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli import dispatch_run
from tests.conftest import ROOT

pytestmark = pytest.mark.unit


@pytest.fixture
def elsewhere(monkeypatch):
    """Work from another folder, as a user with a clone elsewhere: data paths resolve through CLINPROG_ROOT."""

    def move_to(cwd):
        monkeypatch.chdir(cwd)
        monkeypatch.setenv("CLINPROG_ROOT", str(ROOT))
        monkeypatch.setenv("CLINPROG_INDEX_DIR", str(cwd / "idx"))

    return move_to


def readme_output_files() -> set[str]:
    """File names in the first column of the README's Outputs table (`a_{1,2}.json` expanded)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Outputs", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
                m = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", name)
                names |= {f"{m[1]}{x}{m[3]}" for x in m[2].split(",")} if m else {name.rstrip("/")}
    return names


def test_failures_leave_no_near_empty_folders_and_tasks_get_their_own(tmp_path, elsewhere):
    elsewhere(tmp_path)
    search = dispatch_run("task=search", "query=pneumonia")
    assert search.returncode == 2 and search.stderr.startswith("error: no index at")
    assert not (tmp_path / "outputs").exists()  # the folder held only Hydra's files: removed, its parent too

    run = dispatch_run("program=archehr", "data.limit=1", "metrics.bertscore=null", "progress=false")
    assert run.returncode == 0, run.stderr
    [run_dir] = (tmp_path / "outputs" / "archehr").iterdir()
    documented = readme_output_files()
    assert {p.name for p in run_dir.iterdir()} <= documented, "a run file the README's Outputs table does not list"
    assert {"config.json", "main.log", "report.html", "fingerprint.json"} <= documented
    report = dispatch_run("task=report", f"dir={run_dir}")
    assert report.returncode == 0, report.stderr
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == ["archehr", "report"]


def test_a_failure_in_a_folder_with_predictions_keeps_it_and_logs_the_error(tmp_path, elsewhere):
    elsewhere(tmp_path)
    out = tmp_path / "run"
    args = ("program=archehr", "program/archehr/question=baseline", "metrics.bertscore=null", f"hydra.run.dir={out}",
            "progress=false", "program/archehr/evidence=embedding")
    assert dispatch_run(*args).returncode == 0
    proc = dispatch_run(*args, "program.evidence.top_share=0.3")   # another config into the same folder
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and "run.resume=restart" in line
    # the key the user set, once (a stage parameter lives in one config file: no copies to collapse)
    assert "program.evidence.top_share: 0.6 -> 0.3" in line and "copied" not in line
    assert (out / "predictions.jsonl").stat().st_size > 0
    assert (out / "main.log").read_text(encoding="utf-8").strip().splitlines()[-1] == line


def test_a_failure_before_the_first_prediction_leaves_no_folder(tmp_path, elsewhere):
    elsewhere(tmp_path)
    out = tmp_path / "outputs" / "archehr" / "t"
    proc = dispatch_run("program=archehr", "lm=openai_compatible", "lm.client.api_base=http://127.0.0.1:9/v1",
                        "lm.client.num_retries=0", f"hydra.run.dir={out}", "progress=false")
    assert proc.returncode == 2 and proc.stderr.startswith("error: lm=openai_compatible")
    assert not (tmp_path / "outputs").exists()


def test_a_failed_run_in_a_chosen_folder_removes_that_folder_and_never_the_empty_ones_above_it(tmp_path, elsewhere):
    work, mine = tmp_path / "project", tmp_path / "results"
    work.mkdir()
    mine.mkdir()  # the user's empty folders: the working directory and the one the run folder goes in
    elsewhere(work)
    for out in (work / "run", mine / "run"):
        proc = dispatch_run("program=archehr", "lm=openai_compatible", "lm.client.api_base=http://127.0.0.1:9/v1",
                            "lm.client.num_retries=0", f"hydra.run.dir={out}", "progress=false")
        assert proc.returncode == 2 and proc.stderr.startswith("error: lm=openai_compatible")
        assert not out.exists() and out.parent.is_dir()


def test_vertex_ai_without_credentials_is_one_line(monkeypatch, tmp_path):
    from lms.errors import LMConfigError
    from lms.gemini_engine import GeminiEngine

    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))   # no gcloud application-default login
    monkeypatch.setenv("NO_GCE_CHECK", "True")             # not on Google Compute Engine
    with pytest.raises(LMConfigError, match="needs Google Application Default Credentials: neither"):
        GeminiEngine("gemini-2.5-pro", vertexai=True, project="P")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(LMConfigError, match="missing.json could not be used"):
        GeminiEngine("gemini-2.5-pro", vertexai=True, project="P")


def test_an_error_whose_cause_chain_loops_is_still_one_line():
    from omegaconf import OmegaConf

    from lms.errors import lm_failure

    a, b = RuntimeError("outer"), ValueError("default credentials were not found")
    a.__cause__, b.__cause__ = b, a   # google-auth errors can chain back to themselves
    line = str(lm_failure(OmegaConf.create({"client": {"_target_": "lms.factory.gemini_lm", "model": "m"}}), a))
    assert "default credentials were not found" in line


@pytest.fixture(scope="module")
def mediqa_contract():
    from common.config_groups import compose_config
    from common.contract import contract_for

    def make(*overrides):
        cfg = compose_config("program=mediqa_corr", "metrics.bertscore=null", *overrides)
        contract = contract_for(cfg)
        return cfg, contract, contract.load(cfg)

    return make


def test_a_partial_mediqa_submission_reports_missing_and_extra_ids(mediqa_contract, tmp_path, capsys):
    cfg, contract, inputs = mediqa_contract()
    first = inputs.items[0]
    sub = tmp_path / "one.txt"
    sub.write_text(f"{first.text_id} {first.error_flag} {first.error_sentence_id} NA\nzz-extra 0 -1 NA\n")
    scores = contract.score_files(cfg, inputs, str(sub))
    cov = scores["coverage"]
    n = len(inputs.items)
    assert (cov["covered"], cov["missing"], cov["extra"], cov["scored"]) == (1, n - 1, 1, n)
    assert cov["missing_first"][0] == inputs.items[1].text_id and cov["extra_first"] == ["zz-extra"]
    assert scores["error_flag_accuracy"] == pytest.approx(1 / n)  # the official rule: missing notes are wrong
    contract.print_scores(scores)
    printed = capsys.readouterr().out.splitlines()[0]
    assert printed.startswith(f"submission covers 1 of {n} reference notes; {n - 1} missing ({inputs.items[1].text_id}")
    assert "scored as wrong" in printed and "1 extra ids not in the notes, ignored (zz-extra)" in printed

    cfg, contract, inputs = mediqa_contract("data.score_only_submitted=true")
    scores = contract.score_files(cfg, inputs, str(sub))
    assert scores["coverage"]["scored"] == 1 and scores["error_flag_accuracy"] == 1.0


def test_a_submission_for_other_notes_is_one_error(mediqa_contract, tmp_path):
    from tasks.mediqa_corr.data import MediqaDataError

    cfg, contract, inputs = mediqa_contract()
    sub = tmp_path / "other.txt"
    sub.write_text("zz-1 0 -1 NA\nzz-2 0 -1 NA\n")
    with pytest.raises(MediqaDataError, match="none of its 2 text ids is among the"):
        contract.score_files(cfg, inputs, str(sub))


def test_the_report_names_each_stage_implementation_and_an_lm_only_where_one_ran():
    from omegaconf import open_dict

    from common.config_groups import compose_config
    from programs.archehr.report import describe_stages, report_markdown

    no_lm = compose_config("program=archehr", "experiment=no_lm_best", "lm=embedded")
    text = describe_stages(no_lm)
    assert text.startswith("question=finetuned, evidence=learned, answer=extractive, alignment=learned")
    assert text.endswith("; no LM") and "smollm2" not in text.lower()

    mixed = compose_config("program=archehr", "lm=embedded", "program/archehr/evidence=embedding",
                           "+lm.roles.alignment={package_file: other-model.gguf}")
    with open_dict(mixed):
        mixed.lm.roles.alignment.model_path = "/models/medgemma-4b.gguf"
    parts = dict(p.split("=", 1) for p in describe_stages(mixed).split(", ") if "=" in p)
    assert parts["evidence"] == "embedding" and parts["question"].startswith("lm (") and "smollm2" in parts["question"]
    assert parts["alignment"] == "lm (medgemma-4b.gguf)"
    usage = {"cases": 1, "lm_calls_per_case": 0.0, "seconds_per_case": 0.1, "fallbacks": {}, "dropped_ids": 0,
             "grounding": None, "stages": {}, "repairs": {"total": 1, "stages": {"question": 1}}}
    md = report_markdown(no_lm, usage, None)
    assert "lm=" not in md.splitlines()[0] and "- stages: question=finetuned" in md and "(repairs): question 1" in md


def test_a_partial_archehr_submission_says_so_and_can_score_the_submitted_cases(tmp_path, elsewhere):
    elsewhere(tmp_path)
    run = tmp_path / "run"
    assert dispatch_run("program=archehr", "data.limit=1", "metrics.bertscore=null", f"hydra.run.dir={run}",
                        "progress=false").returncode == 0
    full = dispatch_run("program=archehr", "task=evaluate", f"data.submissions={run}", "metrics.bertscore=null",
                        f"hydra.run.dir={tmp_path / 'e1'}")
    assert full.returncode == 0, full.stderr
    [first] = [line for line in full.stdout.splitlines() if line.startswith("submission covers")]
    assert first.startswith("submission covers 1 of 3 cases; 2 missing (902, 903)")
    assert "data.score_only_submitted=true" in first and "subtask_2: invalid submission" in full.stdout
    subset = dispatch_run("program=archehr", "task=evaluate", f"data.submissions={run}", "metrics.bertscore=null",
                          "data.score_only_submitted=true", f"hydra.run.dir={tmp_path / 'e2'}")
    assert subset.returncode == 0, subset.stderr
    scored = json.loads((tmp_path / "e2" / "scores.json").read_text())
    own = json.loads((run / "scores.json").read_text())  # the run scored its one case itself
    for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
        assert scored[st]["overall_score"] == pytest.approx(own[st]["overall_score"])
    assert scored["coverage"]["scored"] == 1 and f"scores: {tmp_path / 'e2' / 'scores.json'}" in subset.stdout


def test_config_mistakes_are_one_line_and_leave_no_folder(tmp_path, elsewhere):
    elsewhere(tmp_path)
    compiled = dispatch_run("program=archehr", "program.compiled=/nope.json", "progress=false")
    assert compiled.returncode == 2
    assert compiled.stderr.strip().splitlines() == [
        "error: program.compiled=/nope.json: no such file (a state saved by task=compile, program.optimize.save_to)"]
    no_backend = dispatch_run("program=archehr", "+lm.client.model_path=/x.gguf", "progress=false")
    assert no_backend.returncode == 2
    assert no_backend.stderr.strip().startswith("error: lm.client.model_path set, but no LM backend is chosen")
    assert not (tmp_path / "outputs").exists()


def test_started_outside_the_clinprog_folder_the_error_says_where_it_looked_and_how_to_point_it_back(tmp_path,
                                                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLINPROG_ROOT", raising=False)
    proc = dispatch_run("program=archehr", "progress=false")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith(f"error: data/archehr/bundled_cases.xml: no such file in {tmp_path} ")
    assert "CLINPROG_ROOT" in proc.stderr
    cases = ROOT / "data" / "archehr" / "bundled_cases.xml"
    proc = dispatch_run("program=archehr", f"data.cases={cases}", "progress=false")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"it is read from {tmp_path}: start main.py in the clinprog folder, or set CLINPROG_ROOT" in proc.stderr
    assert not (tmp_path / "outputs").exists()


def test_an_lm_no_stage_uses_is_named_and_not_loaded(tmp_path, elsewhere):
    elsewhere(tmp_path)
    proc = dispatch_run("program=archehr", "experiment=no_lm_best", "lm=embedded", "data.limit=1",
                        "metrics.bertscore=null", "progress=false", f"hydra.run.dir={tmp_path / 'r'}")
    assert proc.returncode == 0, proc.stderr
    assert "lm=embedded: no stage of program=archehr uses an LM with these settings" in proc.stdout


def test_a_role_lm_error_names_the_role_keys():
    from omegaconf import OmegaConf

    from common.config_groups import compose_config
    from lms import LMConfigError, build_role_lms

    cfg = compose_config("program=archehr", "lm=embedded", "+lm.roles.alignment={model_path: /nope.gguf}")
    with pytest.raises(LMConfigError, match=r"lm.roles.alignment: .*/nope.gguf \(set lm.roles.alignment.model_path"):
        build_role_lms(OmegaConf.create(OmegaConf.to_container(cfg.lm, resolve=True)), ["question", "alignment"])


def test_the_2025_report_does_not_deny_its_scores_and_says_the_question_is_given():
    from common.config_groups import compose_config
    from programs.archehr2025.contract import ArchEHR2025Contract

    cfg = compose_config("program=archehr2025", "experiment=no_lm_best")
    usage = {"cases": 1, "lm_calls_per_case": 0.0, "seconds_per_case": 0.1, "fallbacks": {}, "dropped_ids": 0,
             "grounding": None, "stages": {}, "repairs": {"total": 0, "stages": {}}}
    md = ArchEHR2025Contract().report(cfg, usage, {"overall_factuality_score": 50.0, "overall_relevance_score": 40.0,
                                                   "overall_score": 45.0})
    assert "No scores" not in md and "- overall_score: 45.00" in md
    assert "question=given, else finetuned" in md


def test_a_compile_whose_base_model_is_missing_says_so_in_one_line_before_any_scoring(tmp_path, elsewhere):
    elsewhere(tmp_path)
    run = dispatch_run("task=compile", "experiment=compile_question",
                       f"+program.question.base.model_path={tmp_path / 'nope.gguf'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1] == f"error: model_path={tmp_path / 'nope.gguf'}: no such GGUF file"
    assert "validation examples before" not in run.stdout  # refused before minutes of scoring the current stage
    assert not (tmp_path / "run").exists()
