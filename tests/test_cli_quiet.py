"""Third-party log noise stays out of the console and main.log unless `verbose=true`; task=search reports start-up
and query time apart."""

import json
import logging
import re
import subprocess

import pytest

from common.logs import NOISY, quiet_third_party
from tests.cli import run_main
from tests.conftest import BUNDLED_CASES, BUNDLED_KEY, ROOT

pytestmark = pytest.mark.integration  # real processes: the noise is on their file descriptors

TINY = ROOT / "tests" / "fixtures" / "corpus" / "tiny.jsonl"
SUBMISSION = ROOT / "tests" / "fixtures" / "archehr_submission"
# The lines users reported, as they look in the console (Hydra's format) or in main.log.
NOISE = {
    "faiss": re.compile(r"\[faiss\.loader\]\[INFO\]|Could not load library with AVX512 support|ModuleNotFoundError"),
    "bm25s": re.compile(r"\[bm25s\]\[DEBUG\]"),
    "absl": re.compile(r"\[absl\]\[INFO\] - Using default tokenizer\."),
}


def noise(proc: subprocess.CompletedProcess, run_dir) -> dict[str, list[str]]:
    """Noise lines per kind, from stdout, stderr and the run's main.log."""
    log = run_dir / "main.log"
    text = proc.stdout + proc.stderr + (log.read_text(encoding="utf-8") if log.exists() else "")
    found = {kind: [line for line in text.splitlines() if pattern.search(line)] for kind, pattern in NOISE.items()}
    return {kind: lines for kind, lines in found.items() if lines}


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    """The tiny corpus indexed by `task=index` (default verbosity): the index folder and the run."""
    root = tmp_path_factory.mktemp("quiet")
    proc = run_main("task=index", f"index_dir={root / 'idx'}", "corpus.name=tiny", f"corpus.paths=[{TINY}]",
                    "corpus.text_field=body", "corpus.title_fields=[topic]", "corpus.source_field=src",
                    "corpus.metadata_fields=[]", f"hydra.run.dir={root / 'index_run'}", "progress=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root / "idx", proc, root / "index_run"


def test_index_is_quiet_by_default(tiny_index):
    _, proc, run_dir = tiny_index
    assert "index tiny: 6 chunks, 6 added" in proc.stdout
    assert noise(proc, run_dir) == {}


def test_search_is_quiet_and_reports_load_and_query_apart(tiny_index, tmp_path):
    index_dir, _, _ = tiny_index
    proc = run_main("task=search", f"index_dir={index_dir}", "query='isoniazid rifampin tuberculosis'",
                    f"hydra.run.dir={tmp_path}", "progress=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert noise(proc, tmp_path) == {}
    assert "tiny:d5#0" in proc.stdout.splitlines()[0]
    line = [x for x in proc.stdout.splitlines() if x.startswith("timing:")]
    assert len(line) == 1 and re.fullmatch(
        r"timing: load \d+\.\d s \(embedder \d+\.\d s, index \d+\.\d s; with a warm-up query\), "
        r"query \d+\.\d\d s \(search \d+\.\d\d s, rerank \d+\.\d\d s\)", line[0]), line
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert set(timing) == {"load_s", "embedder_s", "index_s", "query_s", "search_s", "rerank_s"}
    assert timing["load_s"] >= timing["embedder_s"] + timing["index_s"]  # the parts are inside the load
    assert timing["query_s"] == pytest.approx(timing["search_s"] + timing["rerank_s"])


def test_verbose_brings_third_party_lines_back(tiny_index, tmp_path):
    index_dir, _, _ = tiny_index
    proc = run_main("task=search", f"index_dir={index_dir}", "query='metformin'", "verbose=true",
                    f"hydra.run.dir={tmp_path}", "progress=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    # faiss's loader logs which kernels it loads on every CPU; the AVX512 miss only on a CPU without AVX512
    assert any("[faiss.loader][INFO]" in line for line in noise(proc, tmp_path)["faiss"])


def test_rouge_scoring_is_quiet_by_default_and_verbose_shows_absl(tmp_path):
    args = ("program=archehr", "task=evaluate", f"data.cases={BUNDLED_CASES}", f"data.key={BUNDLED_KEY}",
            f"data.submissions={SUBMISSION}", "metrics.bertscore=null")
    quiet = run_main(*args, f"hydra.run.dir={tmp_path / 'quiet'}", "progress=false")
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "subtask_1: rouge1=" in quiet.stdout
    assert noise(quiet, tmp_path / "quiet") == {}
    loud = run_main(*args, "verbose=true", f"hydra.run.dir={tmp_path / 'loud'}", "progress=false")
    assert loud.returncode == 0, loud.stderr[-2000:]
    assert "absl" in noise(loud, tmp_path / "loud")


def test_filter_holds_against_a_library_that_sets_its_logger_to_debug():
    # bm25s sets its logger to DEBUG when imported, after quiet_third_party ran: the handler filter still drops it.
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    root = logging.getLogger()
    saved = {name: logging.getLogger(name).level for name in ("bm25s", "clinprog", *NOISY)}
    root.addHandler(handler)
    try:
        quiet_third_party(False)
        logging.getLogger("clinprog").setLevel(logging.INFO)  # as under Hydra (root at INFO)
        logging.getLogger("bm25s").setLevel(logging.DEBUG)
        logging.getLogger("bm25s").debug("Building index from IDs objects")
        logging.getLogger("faiss.loader").info("Could not load library with AVX512 support")
        logging.getLogger("absl").warning("a real warning")
        logging.getLogger("clinprog").info("our own line")
        assert [r.getMessage() for r in records] == ["a real warning", "our own line"]
        records.clear()
        quiet_third_party(True)
        logging.getLogger("bm25s").setLevel(logging.DEBUG)
        logging.getLogger("bm25s").debug("Building index from IDs objects")
        assert [r.getMessage() for r in records] == ["Building index from IDs objects"]
    finally:
        root.removeHandler(handler)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
