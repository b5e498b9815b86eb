"""What `python main.py ...` does, composed and dispatched in this process: one-line errors, scoring submission files,
the embedded end-to-end run."""

import json

import pytest

from tests.cli import dispatch_run
from tests.conftest import BUNDLED_CASES, BUNDLED_KEY, ROOT

pytestmark = pytest.mark.unit

FIXTURE_SUBMISSION = ROOT / "tests" / "fixtures" / "archehr_submission"


def test_gemini_without_key_fails_in_one_line_before_any_case(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    proc = dispatch_run("program=archehr", "lm=gemini", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: lm=gemini needs an API key: set GEMINI_API_KEY (or use lm.client.vertexai=true)"]
    assert not (tmp_path / "predictions.jsonl").exists()


def test_malformed_cases_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<annotations><case id='1'>", encoding="utf-8")
    proc = dispatch_run("program=archehr", f"data.cases={bad}", f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith(f"error: {bad}: malformed XML")


def test_evaluate_scores_official_submission_files(tmp_path):
    proc = dispatch_run("program=archehr", "task=evaluate", f"data.cases={BUNDLED_CASES}", f"data.key={BUNDLED_KEY}",
                        f"data.submissions={FIXTURE_SUBMISSION}", f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((tmp_path / "scores.json").read_text())
    # hand-computed from the fixture: 8 of 9 predicted ids are essential, 8 of 9 essential found
    assert scores["subtask_2"]["strict_micro_f1"] == pytest.approx(800 / 9)
    # 9 predicted links, all gold; 12 gold links: P=1, R=0.75
    assert scores["subtask_4"]["micro_f1"] == pytest.approx(100 * 2 * 0.75 / 1.75)
    assert scores["subtask_1"]["rougeLsum"] > 50
    assert scores["subtask_3"]["overall_missing"] == ["alignscore", "medcon"]
    assert scores["bertscore_model"]["official"] is False
    for st in ("subtask_1", "subtask_2", "subtask_3", "subtask_4"):
        assert f"{st}:" in proc.stdout


VALIDATION = ROOT / "data" / "mediqa_corr" / "MEDEC-MS-ValidationSet-with-GroundTruth-and-ErrorType.csv"


def index_tiny(index_dir):
    """`task=index` of the 6-chunk fixture corpus into `index_dir`."""
    corpus = ROOT / "tests" / "fixtures" / "corpus" / "tiny.jsonl"
    return ("task=index", f"index_dir={index_dir}", "corpus.name=tiny", f"corpus.paths=[{corpus}]",
            "corpus.text_field=body", "corpus.title_fields=[topic]", "corpus.source_field=src",
            "corpus.metadata_fields=[]", "progress=false")


def test_index_twice_then_search(tmp_path):
    args = index_tiny(tmp_path / "idx")
    first = dispatch_run(*args, f"hydra.run.dir={tmp_path / 'r1'}")
    assert first.returncode == 0, first.stderr[-1500:]
    assert "index tiny: 6 chunks, 6 added, 0 already indexed, 0 failed" in first.stdout
    second = dispatch_run(*args, f"hydra.run.dir={tmp_path / 'r2'}")
    assert "6 chunks, 0 added, 6 already indexed" in second.stdout
    found = dispatch_run("task=search", f"index_dir={tmp_path / 'idx'}", "query='isoniazid rifampin tuberculosis'",
                         f"hydra.run.dir={tmp_path / 'r3'}")
    assert found.returncode == 0, found.stderr[-1500:]
    hits = [line for line in found.stdout.splitlines() if line.lstrip().startswith(("1.", "2."))]
    assert hits[0].split("[TEST] ")[1].startswith("tiny:d5#0")


def test_mediqa_search_without_an_index_fails_before_any_note(tmp_path):
    proc = dispatch_run("program=mediqa_corr", "lm=embedded", f"index_dir={tmp_path / 'missing'}", "data.limit=1",
                        f"hydra.run.dir={tmp_path}")
    assert proc.returncode == 2
    assert "error: no index at" in proc.stderr and "task=index" in proc.stderr
    assert not (tmp_path / "predictions.jsonl").exists()


def test_mediqa_search_over_a_half_written_index_fails_before_any_note(tmp_path):
    """A `task=index` killed mid-way leaves a manifest behind its stored chunks: the run says so in one line at the
    start (it used to run every note with "search failed" as each search's result)."""
    built = dispatch_run(*index_tiny(tmp_path / "idx"), f"hydra.run.dir={tmp_path / 'r1'}")
    assert built.returncode == 0, built.stderr[-1500:]
    manifest = tmp_path / "idx" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "count": 0}))  # what a killed ingest leaves
    proc = dispatch_run("program=mediqa_corr", "lm=embedded", f"index_dir={tmp_path / 'idx'}", "data.limit=1",
                        f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: index at {tmp_path / 'idx'} is inconsistent (manifest says 0 chunks")
    assert last.endswith("or run the agent without its search tool: program.search.enabled=false")
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_mediqa_evaluate_scores_a_submission_file(tmp_path):
    run = tmp_path / "run.txt"
    run.write_text('ms-val-0 1 5 "Culture tests indicate Trichomonas vaginalis."\nms-val-1 0 -1 NA\n')
    proc = dispatch_run("program=mediqa_corr", "task=evaluate", f"data.path={VALIDATION}", "data.limit=2",
                        f"data.predictions={run}", "metrics.bertscore=null", f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["error_flag_accuracy"] == 1.0 and scores["error_sentence_accuracy"] == 1.0
    assert scores["R1FC"] == pytest.approx(1.0, abs=1e-6) and scores["AggregateC"] == pytest.approx(1.0, abs=1e-6)


def test_an_lm_server_that_refuses_mid_run_is_one_line_naming_backend_and_host(tmp_path):
    proc = dispatch_run("program=archehr", "lm=openai_compatible", "lm.client.api_base=http://127.0.0.1:9/v1",
                        "lm.client.check=false", "lm.client.num_retries=0", f"hydra.run.dir={tmp_path}", "progress=false")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: lm=openai_compatible (127.0.0.1:9), model local-model failed:")


def test_lm_failure_names_the_api_host_and_never_the_key(monkeypatch):
    from omegaconf import OmegaConf

    from lms.errors import lm_failure

    monkeypatch.setenv("GEMINI_API_KEY", "sk-secret-123")
    cfg = OmegaConf.create({"client": {"_target_": "lms.factory.gemini_lm", "model": "gemini-2.5-pro",
                                       "api_key_env": "GEMINI_API_KEY"}})
    try:
        try:
            raise OSError("[Errno -3] name resolution failed for key=sk-secret-123")
        except OSError as dns:
            raise RuntimeError("LMUnexpectedError") from dns
    except RuntimeError as exc:
        message = str(lm_failure(cfg, exc))
    assert message.startswith("lm=gemini (generativelanguage.googleapis.com), model gemini-2.5-pro failed: OSError")
    assert "sk-secret-123" not in message and "***" in message


def test_report_task_rebuilds_report_html_from_the_run_files(tmp_path):
    out = tmp_path / "run"
    assert dispatch_run("program=archehr", "metrics.bertscore=null", f"hydra.run.dir={out}", "progress=false").returncode == 0
    original = (out / "report.html").read_text()
    (out / "report.html").unlink()
    proc = dispatch_run("task=report", f"dir={out}", f"hydra.run.dir={tmp_path / 'r'}")
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert (out / "report.html").read_text() == original  # from the files alone, no rerun
    missing = dispatch_run("task=report", f"dir={tmp_path / 'nowhere'}", f"hydra.run.dir={tmp_path / 'r2'}")
    assert missing.returncode == 2 and "no config.json" in missing.stderr


def test_report_task_reads_the_key_the_run_was_scored_with(tmp_path):
    import json

    out = tmp_path / "run"
    assert dispatch_run("program=archehr", "data.key=null", "metrics.bertscore=null", f"hydra.run.dir={out}",
                        "progress=false").returncode == 0
    assert json.loads((out / "scores.json").read_text())["key"] is None
    original = (out / "report.html").read_text()
    config = json.loads((out / "config.json").read_text())
    config["data"]["key"] = "auto"  # as if a key had appeared beside the cases since: the run was not scored with it
    (out / "config.json").write_text(json.dumps(config))
    assert dispatch_run("task=report", f"dir={out}", f"hydra.run.dir={tmp_path / 'r'}").returncode == 0
    assert (out / "report.html").read_text() == original and 'title="gold label"' not in original


def test_retries_on_5xx_are_counted_in_usage_json(tmp_path):
    """A fake OpenAI-compatible server answers 503 twice, then `{}` (which every stage's parser rejects)."""
    from tests.cli import fake_openai_server

    seen = {"posts": 0}

    def flaky(_: str) -> str | int:
        seen["posts"] += 1
        return 503 if seen["posts"] <= 2 else "{}"

    with fake_openai_server(flaky) as server:
        proc = dispatch_run("program=archehr", "data.limit=1", "lm=openai_compatible", "lm.client.model=m",
                            f"lm.client.api_base={server['api_base']}", "lm.client.num_retries=3",
                            "lm.client.cache=false", f"hydra.run.dir={tmp_path}", "progress=false", "metrics.bertscore=null")
    assert proc.returncode == 0, proc.stderr[-2000:]
    usage = json.loads((tmp_path / "usage.json").read_text())
    assert usage["retries"] == 2 == usage["stages"]["question"]["retries"]  # the first call was retried twice
    assert usage["fallbacks"]  # `{}` parses for no stage: each took its documented fallback
