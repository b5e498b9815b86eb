"""The repair command a damaged index prints works for corpora named with `corpus.name=` (issue #21, Index): the
test runs exactly what was printed. The corpus name and path hold a space, and a second corpus shares the index."""

import json
import re
import shlex
import subprocess

import pytest

from tests.cli import dispatch_run, main_command
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

# A cheap deterministic embedder in place of MiniLM; it is part of what the repair command must reproduce.
EMBEDDER = ["~embedder", "+embedder._target_=tests.retrieval_helpers.HashEmbedder"]


def write_corpus(path, word):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": f"q{i}", "focus": f"Topic {i}", "question": f"What is topic {i}?",
                                        "answer": f"{word} answer {i} about anemia and iron.", "source": "T"}) + "\n"
                            for i in range(5)))


def test_the_printed_repair_command_rebuilds_a_corpus_named_on_the_command_line(tmp_path):
    notes = tmp_path / "my files" / "t5.jsonl"
    other = tmp_path / "o3.jsonl"
    write_corpus(notes, "Original")
    write_corpus(other, "Other")
    idx = tmp_path / "idx"
    first = dispatch_run("task=index", "corpus=medquad", "corpus.name='my notes'", f"corpus.paths=['{notes}']",
                         f"index_dir={idx}", f"hydra.run.dir={tmp_path / 'r1'}", "progress=false", *EMBEDDER)
    assert first.returncode == 0, first.stderr[-1500:]
    second = dispatch_run("task=index", "corpus=medquad", "corpus.name=other", f"corpus.paths=[{other}]",
                          "corpus.metadata_fields=[]", f"index_dir={idx}", f"hydra.run.dir={tmp_path / 'r2'}",
                          "progress=false", *EMBEDDER)
    assert second.returncode == 0, second.stderr[-1500:]
    write_corpus(notes, "Changed")  # the repair must index the files as they are now, under the same name
    for name in ("dense.faiss", "vectors.f32"):
        (idx / name).unlink()

    search = ["task=search", "query=anemia iron", f"index_dir={idx}", *EMBEDDER]
    broken = dispatch_run(*search, f"hydra.run.dir={tmp_path / 's1'}")
    assert broken.returncode != 0
    errors = [line for line in (broken.stdout + broken.stderr).splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in broken.stderr, broken.stderr[-1500:]
    commands = re.findall(r"`([^`]+)`", errors[0])
    assert len(commands) == 2 and errors[0].endswith("repairs it (or remove the folder and re-index)"), errors[0]
    # before: `python main.py task=index corpus=my notes corpus=other index_dir=...`, which Hydra rejects
    for i, command in enumerate(commands):
        words = shlex.split(command)
        assert words[:3] == ["python", "main.py", "task=index"]
        run = subprocess.run(main_command(*words[2:], f"hydra.run.dir={tmp_path / f'fix{i}'}", "progress=false"),
                             cwd=ROOT, capture_output=True, text=True, timeout=600)  # what the user runs: a process
        assert run.returncode == 0, (command, run.stderr[-1500:])
    fixed = dispatch_run(*search, f"hydra.run.dir={tmp_path / 's2'}")
    assert fixed.returncode == 0, fixed.stderr[-1500:]
    assert "my notes:q0#0" in fixed.stdout and "other:q0#0" in fixed.stdout
    assert "Changed answer" in fixed.stdout and "Original answer" not in fixed.stdout
    manifest = json.loads((idx / "manifest.json").read_text())
    assert manifest["count"] == 10 and set(manifest["corpora"]) == {"my notes", "other"}
