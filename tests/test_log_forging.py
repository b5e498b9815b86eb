"""Case ids are user input: one holding a newline and a log line's prefix must not write a line of its own into
main.log (the data.shard line, the resume warning, the loader's warning all escape it, as the server does). The log
lines are read as pytest's caplog holds them (Hydra's handlers write the same records to main.log)."""

import logging
import xml.etree.ElementTree as ET

import pytest

from tests.cli import dispatch_run
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

FORGED = "[2026-01-01 00:00:00,000][clinprog][ERROR] - forged"
QUIET = ("program=archehr", "program/archehr/question=baseline", "metrics.bertscore=null", "progress=false")


@pytest.fixture
def forged_cases(tmp_path):
    """Two dev cases whose ids hold a newline and a forged log line, and a third whose note has text but no sentence
    elements (the loader warns about it, naming the case)."""
    tree = ET.parse(ROOT / "data" / "archehr" / "dev_cases.xml")
    cases = tree.getroot().findall("case")
    for case in cases[3:]:
        tree.getroot().remove(case)
    cases[0].set("id", f"x\n{FORGED} 1")
    cases[1].set("id", f"y\r\n{FORGED} 2")
    cases[2].set("id", f"z\n{FORGED} 3")
    sentences = cases[2].find("note_excerpt_sentences")
    cases[2].remove(sentences)
    path = tmp_path / "forged.xml"
    tree.write(path, encoding="utf-8")  # ElementTree writes the newlines as &#10; (attribute values keep them)
    return path


def forged_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("[2026-01-01")]


def test_case_ids_cannot_forge_log_lines(tmp_path, forged_cases, caplog):
    caplog.set_level(logging.INFO)
    shard = tmp_path / "shard"
    proc = dispatch_run(*QUIET, f"data.cases={forged_cases}", "data.num_shards=2", "data.shard=0",
                        f"hydra.run.dir={shard}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = caplog.text
    assert "data.shard=0 of data.num_shards=2" in log and r"(x\n[2026-01-01" in log, log
    assert r"case z\n[2026-01-01" in log  # the loader's warning
    assert forged_lines(log) == [], log

    run = tmp_path / "run"
    assert dispatch_run(*QUIET, f"data.cases={forged_cases}", f"hydra.run.dir={run}").returncode == 0
    caplog.clear()
    proc = dispatch_run(*QUIET, f"data.cases={forged_cases}", "data.limit=1", f"hydra.run.dir={run}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = caplog.text
    assert "are not among this run's inputs" in log and r"y\r\n[2026-01-01" in log, log
    assert forged_lines(log) == [] and forged_lines(proc.stderr) == [] and forged_lines(proc.stdout) == []


def test_an_error_naming_a_forged_id_is_one_line(tmp_path, forged_cases):
    text = forged_cases.read_text(encoding="utf-8")
    first = text.index("<sentence ", text.index("note_excerpt_sentences"))
    sentence = text[first: text.index("</sentence>", first) + len("</sentence>")]
    broken = tmp_path / "duplicate_sentence.xml"
    broken.write_text(text.replace(sentence, sentence + sentence, 1), encoding="utf-8")  # the first case's note
    run = tmp_path / "refused"
    proc = dispatch_run(*QUIET, f"data.cases={broken}", f"hydra.run.dir={run}")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and r"case x\n[2026-01-01" in lines[0], proc.stderr
    assert "duplicate note sentence id" in lines[0]
    assert forged_lines(proc.stderr) == [] and forged_lines(proc.stdout) == []
