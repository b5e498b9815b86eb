"""Command-line probes of runs that must finish, or fail one job in one line: multirun, batch, fabrications, shards
and their merges, forged case ids."""

from __future__ import annotations

import json
import random
import shutil
import string
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.probes.harness import (
    BASE,
    DATA,
    FORGED,
    QUIET,
    ROOT,
    Fail,
    clinprog,
    forged_lines,
    no_traceback,
    ok_run,
    one_error,
    script,
)

if TYPE_CHECKING:
    from benchmarks.probes.cli import Cli

def multirun_probes(c: Cli) -> None:
    """Item 4: a multirun whose second job fails (the basic launcher and joblib's)."""
    tmp, job = c.tmp, c.job
    for launcher, extra in (("basic", ()), ("joblib", ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2"))):
        @job("4", f"-m ...threshold=0.3,7,0.5 ({launcher} launcher): jobs 0 and 2 finish, one error line for job #1",
             last=True)
        def multirun(launcher=launcher, extra=extra) -> None:
            sweep = tmp / f"sweep_{launcher}"
            proc = clinprog("-m", *extra, *BASE, "data.limit=1", "program.evidence.threshold=0.3,7,0.5",
                            f"hydra.sweep.dir={sweep}", timeout=170)
            line = one_error(proc, last=False, says="error: multirun job #1 (program.evidence.threshold=7) failed: "
                                                    "program.evidence.threshold must be a number")
            if "1 of 3 multirun jobs failed; the others finished" not in proc.stderr:
                raise Fail(f"no summary line: {proc.stderr[-300:]}")
            for k in (0, 2):
                job_dir = sweep / str(k)
                if not (job_dir / "scores.json").is_file() or (job_dir / "failed.json").exists():
                    raise Fail(f"job {k} did not finish ({sorted(p.name for p in job_dir.glob('*'))}); {line}")
            if not (sweep / "1" / "failed.json").is_file():
                raise Fail("job 1 has no failed.json")


def batch_probes(c: Cli) -> None:
    """The batch side of item 2: the default (learned) question stage on a one-"word" 200 KB narrative."""
    files, job, run_dir = c.files, c.job, c.run_dir
    @job("2", "batch run: a 200 KB one-word narrative through the default question stage ends in time", last=True)
    def long_word_batch() -> None:
        word = "".join(random.Random(2).choices(string.ascii_lowercase, k=200_000))

        def edit(cases):
            cases[0].find("patient_narrative").text = word
        cases = files.cases_xml("long_word.xml", edit, keep=1)
        start = time.monotonic()
        ok_run(clinprog("program=archehr", *QUIET, f"data.cases={cases}", "data.key=null", run_dir("long_word"),
                        timeout=120))
        if time.monotonic() - start > 90:
            raise Fail(f"took {time.monotonic() - start:.0f} s")


def fabrications_probes(c: Cli) -> None:
    """Item 15: a fabrication set the script did not make, scored per kind."""
    files, job = c.files, c.job
    @job("15", "grounding_eval.py --fabrications FILE scores someone else's set per kind; a bad file is one line",
         last=True)
    def fabrications() -> None:
        doc = {"format": "grounding-fabrications/1", "cases": {
            "903": [{"text": "Her creatinine worsened to 4.1 by discharge.", "citations": ["6"], "kind": "reversed trend"},
                    {"text": "Lisinopril was continued despite hypotension.", "citations": ["4"],
                     "kind": "flipped negation"}],
            "901": [{"text": "She was given 500 mg of aspirin daily.", "citations": ["2"], "kind": "wrong dose"}]}}
        good, bad = files.path("inputs", "fabrications.json"), files.path("inputs", "fabrications_bad.json")
        good.write_text(json.dumps(doc))
        bad.write_text(json.dumps({**doc, "cases": {"903": [{"text": "x", "citations": ["999"], "kind": "k"}]}}))
        args = ("--cases", str(DATA / "bundled_cases.xml"), "--key", str(DATA / "bundled_cases_key.json"),
                "--fabrications")
        one_error(script(ROOT / "benchmarks" / "grounding_eval.py", *args, str(bad)), says="999")
        proc = script(ROOT / "benchmarks" / "grounding_eval.py", *args, str(good))
        ok_run(proc)
        for kind in ("reversed trend", "flipped negation", "wrong dose"):
            if f"| {kind} |" not in proc.stdout or f"recall: {kind}" not in proc.stdout:
                raise Fail(f"no per-kind row/column for {kind!r}: {proc.stdout[-300:]}")


def merges_probes(c: Cli) -> None:
    """Items 5 and 9 (and round 3's merge mismatches): shards of a 4-case run, merged damaged."""
    tmp, job = c.tmp, c.job
    shards: dict[str, Path] = {}
    ready = c.ready

    @job("5", "two shards of a 4-case run (the merges below use them)")
    def make_shards() -> None:
        try:
            for k in (0, 1):
                ok_run(clinprog(*BASE, f"data.cases={DATA / 'dev_cases.xml'}", "data.limit=4", "data.num_shards=2",
                                f"data.shard={k}", f"hydra.run.dir={tmp / 'shards' / f's{k}'}"))
                shards[f"s{k}"] = tmp / "shards" / f"s{k}"
        finally:
            ready.set()

    def merge(*dirs: Path, out: Path) -> subprocess.CompletedProcess:
        return clinprog("task=merge", f"dirs=[{','.join(str(d) for d in dirs)}]", f"hydra.run.dir={out}")

    def both_shards() -> tuple[Path, Path]:
        """The two shard folders, once make_shards has finished (a probe that needs them fails if it could not)."""
        if not ready.wait(300) or len(shards) < 2:
            raise Fail("no shards to merge (their runs failed)")
        return shards["s0"], shards["s1"]

    def damaged(tag: str, name: str, content: Callable[[Path], str]) -> Path:
        _, s1 = both_shards()
        copy = tmp / "damaged" / tag
        shutil.copytree(s1, copy)
        (copy / name).write_text(content(s1))
        return copy

    def merge_refused(item: str, what: str, name: str, content: Callable[[Path], str], says: str) -> None:
        tag = f"m{len(c.late)}"

        @job(item, what, after_shards=True)
        def check() -> None:
            copy = damaged(tag, name, content)
            out = tmp / "merged" / tag
            one_error(merge(shards["s0"], copy, out=out), says=says)
            if (out / "predictions.jsonl").exists():
                raise Fail("the refused merge wrote predictions.jsonl")

    def without(fields: tuple[str, ...]) -> Callable[[Path], str]:
        def content(folder: Path) -> str:
            lines = (folder / "predictions.jsonl").read_text().splitlines()
            record = json.loads(lines[0])
            for f in fields:
                record.pop(f)
            return "\n".join([json.dumps(record), *lines[1:]]) + "\n"
        return content

    merge_refused("5", "merge of a shard whose record lacks answer and evidence_ids is one error line",
                  "predictions.jsonl", without(("answer", "evidence_ids")), "lacks evidence_ids, answer")
    for content, says in (([], "a JSON array, not an object"), ("x", "a JSON string, not an object"),
                          ({"data": "x"}, "its data is a JSON string, not an object")):
        merge_refused("9", f"merge of a shard whose config.json is {json.dumps(content)} is one error line",
                      "config.json", lambda _f, c=content: json.dumps(c), says)
    merge_refused("9", "merge of a shard whose fingerprint.json is [1] is one error line", "fingerprint.json",
                  lambda _f: "[1]", "a JSON array, not an object")
    merge_refused("r3", "merge of a shard whose config.json is JSON nested 100,000 deep is one error line",
                  "config.json", lambda _f: "[" * 100_000 + "]" * 100_000, "config.json")

    @job("5", "merge into one of its own shards (hydra.run.dir=<shard>) is refused and the shard is unchanged",
         after_shards=True)
    def merge_into_shard() -> None:
        s0, s1 = both_shards()
        before = {p: p.read_bytes() for p in s0.rglob("*") if p.is_file()}
        one_error(merge(s0, s1, out=s0), says="the merge would overwrite it")
        after = {p: p.read_bytes() for p in s0.rglob("*") if p.is_file()}
        if after != before:
            raise Fail(f"the shard changed: {sorted(str(p.name) for p in set(after) ^ set(before) or after)[:5]}")

    @job("r3", "merge mismatches: a missing shard and a shard given twice are one error line each; both shards merge",
         after_shards=True)
    def merge_mismatches() -> None:
        s0, s1 = both_shards()
        one_error(merge(s0, out=tmp / "merged" / "gap"), says="a gap: shard 1 of 2")
        twice = merge(s0, s0, out=tmp / "merged" / "twice")  # an overlap, and so a gap: a line for each
        no_traceback(twice)
        if twice.returncode != 2 or "error: an overlap: shard 0 of 2 is in 2 folders" not in twice.stderr or any(
                not line.startswith("error: ") for line in twice.stderr.strip().splitlines()):
            raise Fail(f"shard 0 twice: exit {twice.returncode}: {twice.stderr[-300:]}")
        proc = merge(s0, s1, out=tmp / "merged" / "good")
        ok_run(proc)
        lines = (tmp / "merged" / "good" / "predictions.jsonl").read_text().splitlines()
        if len(lines) != 4:
            raise Fail(f"the merge holds {len(lines)} records, not 4")
        for k in (2, 3, 4):
            got = json.loads((tmp / "merged" / "good" / f"submission_subtask_{k}.json").read_text())
            if len(got) != 4:
                raise Fail(f"submission_subtask_{k}.json holds {len(got)} cases, not 4")


def forged_ids_probes(c: Cli) -> None:
    """Item 7: case ids that try to forge log lines."""
    tmp, files, job, run_dir = c.tmp, c.files, c.job, c.run_dir
    def forge(cases):
        cases[0].set("id", f"x\n{FORGED} 1")
        cases[1].set("id", f"y\r\n{FORGED} 2")
        cases[2].set("id", f"z\n{FORGED} 3")
        cases[2].remove(cases[2].find("note_excerpt_sentences"))

    @job("7", "case ids holding a newline and a log prefix write no forged line (shard slice, resume, loader)")
    def log_forging() -> None:
        forged = files.cases_xml("forged.xml", forge, source=DATA / "dev_cases.xml", keep=3)
        shard = tmp / "runs" / "forged_shard"
        ok_run(clinprog(*BASE, f"data.cases={forged}", "data.num_shards=2", "data.shard=0", f"hydra.run.dir={shard}"))
        run = tmp / "runs" / "forged_run"
        ok_run(clinprog(*BASE, f"data.cases={forged}", f"hydra.run.dir={run}"))
        again = clinprog(*BASE, f"data.cases={forged}", "data.limit=1", f"hydra.run.dir={run}")
        ok_run(again)
        for where, text in (("the shard's main.log", (shard / "main.log").read_text()),
                            ("the run's main.log", (run / "main.log").read_text()),
                            ("the rerun's output", again.stdout + again.stderr)):
            if forged_lines(text):
                raise Fail(f"{where} holds a forged line: {forged_lines(text)[0]!r}")
        if r"x\n[2026-01-01" not in (shard / "main.log").read_text():
            raise Fail("the shard's main.log does not name the escaped id (was the slice line written?)")

    @job("7", "an error naming a forged case id (a duplicate sentence id) is one line")
    def forged_error() -> None:
        def edit(cases):
            forge(cases)
            sentences = cases[0].find("note_excerpt_sentences")
            sentences.append(sentences.findall("sentence")[0])
        broken = files.cases_xml("forged_duplicate.xml", edit, source=DATA / "dev_cases.xml", keep=3)
        proc = clinprog(*BASE, f"data.cases={broken}", run_dir("forged_error"))
        one_error(proc, says=r"case x\n[2026-01-01")
        if forged_lines(proc.stdout + proc.stderr):
            raise Fail("a forged line on stdout/stderr")


