"""Command-line probes of one-line refusals: learned state files, compile, hostile inputs, settings, thread counts."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.probes.harness import (
    BASE,
    DATA,
    QUIET,
    ROOT,
    Fail,
    clinprog,
    free_port,
    laughs_text,
    ok_run,
    one_error,
    xxe_text,
)

if TYPE_CHECKING:
    from benchmarks.probes.cli import Cli

def state_files_probes(c: Cli) -> None:
    """Item 10 and 6: learned state files that do not fit the code."""
    files, job, run_dir = c.files, c.job, c.run_dir
    for what, edit, says in (
            ("every scale = 0", lambda d: d["evidence.scorer"].__setitem__(
                "scale", [0.0] * len(d["evidence.scorer"]["scale"])), "scale of 0"),
            ("scorer: []", lambda d: d.__setitem__("evidence.scorer", []), "program.compiled="),
            ("selection: [1,2,3]", lambda d: d["evidence.scorer"].__setitem__("selection", [1, 2, 3]),
             "selection must map names"),
            ('threshold: "abc"', lambda d: d["evidence.scorer"]["selection"].__setitem__("threshold", "abc"),
             "selection must map names"),
            ("a renamed feature (says what differs)", lambda d: d["evidence.scorer"]["features"].__setitem__(
                0, "renamed"), "new here: ['")):
        item = "6" if "scale" in what else "10"

        @job(item, f"a state file with {what} is one error line")
        def state_file(what=what, edit=edit, says=says) -> None:
            path = files.state(re.sub(r"\W+", "_", what) + ".json", edit)
            one_error(clinprog(*BASE, f"program.compiled={path}", "data.limit=1", run_dir(path.stem)), says=says)

    @job("10", "program.compiled=X whose X.meta.json is not JSON is one error line")
    def bad_meta() -> None:
        path = files.path("inputs", "badmeta", "state.json")
        shutil.copy(DATA / "compiled_program.json", path)
        path.with_name("state.json.meta.json").write_text("{not json")
        one_error(clinprog(*BASE, f"program.compiled={path}", "data.limit=1", run_dir("badmeta")),
                  says="meta.json: not JSON")


def compile_refusals_probes(c: Cli) -> None:
    """Item 11: compile refusals."""
    tmp, files, job, run_dir = c.tmp, c.files, c.job, c.run_dir
    @job("11", "task=compile on a key without clinician_answer_sentences is one error line")
    def compile_no_answers() -> None:
        key = json.loads((DATA / "dev_cases_key.json").read_text())
        for case in key:
            case.pop("clinician_answer_sentences", None)
        path = files.path("inputs", "key_without_answers.json")
        path.write_text(json.dumps(key))
        one_error(clinprog(*BASE, "task=compile", "optimizer=logistic", f"data.train={DATA / 'dev_cases.xml'}",
                           f"data.train_key={path}", f"program.optimize.save_to={tmp / 'compiled' / 'x.json'}",
                           run_dir("compile_no_answers")), says="clinician_answer_sentences")

    @job("11", "task=compile with program.optimize.save_to=<a folder> is refused before fitting")
    def compile_save_to_folder() -> None:
        folder = files.path("compiled", "a_folder", "x").parent
        start = time.monotonic()
        one_error(clinprog(*BASE, "task=compile", "optimizer=logistic", f"data.train={DATA / 'dev_cases.xml'}",
                           f"data.train_key={DATA / 'dev_cases_key.json'}", f"program.optimize.save_to={folder}",
                           run_dir("compile_folder")), says="must name a .json file")
        if time.monotonic() - start > 30:
            raise Fail(f"refused only after {time.monotonic() - start:.0f} s (after fitting?)")


def inputs_probes(c: Cli) -> None:
    """Round 3 and earlier: inputs."""
    tmp, files, job, run_dir = c.tmp, c.files, c.job, c.run_dir
    @job("r3", "path traversal in case ids (../../escape) writes nothing outside the run folder")
    def traversal() -> None:
        def edit(cases):
            for k, case in enumerate(cases):
                case.set("id", f"../../escape-{k}" if k else "/tmp/../../escape-abs")
        cases = files.cases_xml("traversal.xml", edit)
        run = tmp / "runs" / "a" / "b" / "traversal"
        outside_before = {p for p in tmp.rglob("*") if run not in p.parents and p != run}
        ok_run(clinprog(*BASE, f"data.cases={cases}", "data.key=null", f"hydra.run.dir={run}"))
        new = {p for p in tmp.rglob("*") if run not in p.parents and p != run} - outside_before
        escaped = sorted(str(p) for p in new if "escape" in p.name)
        if escaped or list(Path("/tmp").glob("escape-*")) or list(ROOT.glob("escape-*")):
            raise Fail(f"files outside the run folder: {escaped or 'under /tmp or the repository'}")

    for name, text in (("billion laughs", laughs_text()), ("XXE (file:///etc/passwd)", xxe_text())):
        @job("r3", f"a cases file with {name} is one error line")
        def hostile_xml(name=name, text=text) -> None:
            path = files.path("inputs", re.sub(r"\W+", "_", name) + ".xml")
            path.write_text(text)
            line = one_error(clinprog(*BASE, f"data.cases={path}", run_dir(path.stem)), says=str(path))
            if "root:" in line:
                raise Fail("the error line quotes /etc/passwd")

    @job("r3", "a key file of JSON nested 100,000 deep is one error line")
    def deep_key() -> None:
        path = files.path("inputs", "deep_key.json")
        path.write_text("[" * 100_000 + "]" * 100_000)
        one_error(clinprog(*BASE, f"data.key={path}", run_dir("deep_key")), says=str(path))

    @job("r3", "evaluating submission files of JSON nested 100,000 deep: each subtask invalid, not scored")
    def deep_submission() -> None:
        folder = files.path("inputs", "deep_submission", "x").parent
        for k in (1, 2, 3, 4):
            (folder / f"submission_subtask_{k}.json").write_text("[" * 100_000 + "]" * 100_000)
        proc = clinprog(*BASE, "task=evaluate", f"data.submissions={folder}", run_dir("deep_submission"))
        ok_run(proc)
        for k in (1, 2, 3, 4):
            if f"subtask_{k}: invalid submission, not scored: {folder / f'submission_subtask_{k}.json'}: cannot " \
                    "read submission" not in proc.stdout + proc.stderr:
                raise Fail(f"subtask {k} is not reported invalid: {proc.stdout[-300:]}")

    @job("r3", "evaluating submissions with an integer case_id and a repeated case id: no traceback, every subtask "
               "scored or named invalid")
    def odd_submissions() -> None:
        folder = files.path("inputs", "odd_submission", "x").parent
        ids = ["901", "902", "903"]
        predictions = {1: lambda c: "Why?", 2: lambda c: ["2"], 3: lambda c: "An answer.",
                       4: lambda c: [{"answer_id": "1", "evidence_id": ["2"]}]}
        for k, make in predictions.items():
            entries = [{"case_id": c, "prediction": make(c)} for c in ids]
            if k == 1:
                entries[1]["case_id"] = 902  # an integer id: the official subtask fails on it
            if k == 2:
                entries.append({"case_id": "901", "prediction": ["3"]})  # twice: the official scripts score both
            (folder / f"submission_subtask_{k}.json").write_text(json.dumps(entries))
        proc = clinprog(*BASE, "task=evaluate", f"data.submissions={folder}", run_dir("odd_submission"))
        ok_run(proc)
        for k in (1, 2, 3, 4):
            if f"subtask_{k}:" not in proc.stdout + proc.stderr:
                raise Fail(f"subtask {k} neither scored nor named invalid: {proc.stdout[-300:]}")
        if "case ids written more than once in the submission: 901 (2 times)" not in proc.stdout:
            raise Fail("the repeated case id is not named")

    @job("r3", "a predictions.jsonl line nested 100,000 deep (a resumed run) is one error line naming file:line")
    def deep_record() -> None:
        run = tmp / "runs" / "deep_record"
        ok_run(clinprog(*BASE, "data.limit=2", f"hydra.run.dir={run}"))
        path = run / "predictions.jsonl"
        lines = path.read_text().splitlines()
        path.write_text("\n".join(["[" * 100_000 + "]" * 100_000, *lines[1:]]) + "\n")
        one_error(clinprog(*BASE, "data.limit=2", f"hydra.run.dir={run}"), says=f"{path}:1")

    @job("r3", "a stale run.lock (echo 1 > run.lock) is taken over with a warning")
    def stale_lock() -> None:
        run = files.path("runs", "stale_lock", "run.lock").parent
        (run / "run.lock").write_text("1\n")
        proc = clinprog(*BASE, "data.limit=1", f"hydra.run.dir={run}")
        ok_run(proc)
        if not (run / "predictions.jsonl").is_file():
            raise Fail("no predictions written")

    @job("r3", "a rerun with a changed config is refused in one line and keeps .hydra/config.yaml")
    def changed_rerun() -> None:
        run = tmp / "runs" / "changed"
        ok_run(clinprog(*BASE, "data.limit=1", f"hydra.run.dir={run}"))
        before = (run / ".hydra" / "config.yaml").read_bytes()
        one_error(clinprog(*BASE, "data.limit=1", "program.evidence.threshold=0.9", f"hydra.run.dir={run}"),
                  says="threshold")
        if (run / ".hydra" / "config.yaml").read_bytes() != before:
            raise Fail(".hydra/config.yaml was rewritten by the refused rerun")

    @job("r3", "an API key never appears in the error line of an unreachable LM server")
    def leaked_key() -> None:
        dead = free_port()
        proc = clinprog(*QUIET, "program=archehr", "lm=openai_compatible", f"lm.client.api_base=http://127.0.0.1:{dead}/v1",
                        "lm.client.api_key_env=PROBE_LM_KEY", "lm.client.num_retries=0", "data.limit=1",
                        f"cache_dir={tmp / 'lmcache'}", run_dir("leaked_key"),
                        env={"PROBE_LM_KEY": "sk-probe-secret-4242"})
        line = one_error(proc, says="127.0.0.1")
        if "sk-probe-secret-4242" in proc.stdout + proc.stderr:
            raise Fail(f"the key is printed: {line}")

    @job("14", "a MEDIQA-CORR CSV with a 1 MB cell is one error line naming its row")
    def big_cell() -> None:
        import csv
        path = files.path("inputs", "big_cell.csv")
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["Text ID", "Text", "Sentences"])
            for k in range(1, 4):
                writer.writerow([f"n{k}", "x" * 1_000_000 if k == 3 else f"Note {k}.", f"0 Note {k}.\n1 It is fine."])
        one_error(clinprog("program=mediqa_corr", *QUIET, f"data.path={path}", run_dir("big_cell")),
                  says=f"{path}, row 4: malformed CSV")


def settings_probes(c: Cli) -> None:
    """One-line refusals of settings (items 6, 8, 12, 13 and round 3)."""
    files, job, refused = c.files, c.job, c.refused
    for override, says in (("program.answer.max_words=0", "program.answer.max_words must be"),
                           ("program.answer.max_words=-5", "program.answer.max_words must be")):
        refused("6", override, override, says=says)
    a_file = files.path("inputs", "a_file")
    a_file.write_text("x")

    @job("8", "hydra.run.dir under a file is one error line and the file is unchanged")
    def under_a_file() -> None:
        one_error(clinprog(*BASE, "data.limit=1", f"hydra.run.dir={a_file / 'sub'}"),
                  exact=f"error: hydra.run.dir={a_file / 'sub'}: {a_file} is a file, not a folder; choose a folder "
                        "for the run's outputs")
        if a_file.read_text() != "x":
            raise Fail("the file was changed")

    refused("8", "hydra.run.dir=/proc", "data.limit=1", "hydra.run.dir=/proc/clinprog-probe",
            says="cannot create or write that folder")
    refused("8", "hydra.sweep.dir under a file (-m)", "-m", "data.limit=1", f"hydra.sweep.dir={a_file / 'm'}",
            says="is a file, not a folder")
    refused("r3", "hydra.run.dir naming an existing file", "data.limit=1", f"hydra.run.dir={a_file}", says=str(a_file))
    for override, says in (("executor.num_workers=abc", "executor.num_workers must be an integer >= 1, not 'abc'"),
                           ("executor.num_workers=0", "executor.num_workers must be an integer >= 1, not 0"),
                           ("executor.cpus_per_worker=abc", "executor.cpus_per_worker must be a number of CPUs > 0"),
                           ("executor.object_store_mb=abc", "executor.object_store_mb must be an integer >= 75")):
        refused("8", override, "data.limit=1", "executor=ray", override, says=f"error: {says}")
    for override in ("program.evidence.threshold=abc", "program.evidence.min_selected=abc"):
        refused("12", override, override, says=override.split("=")[0])
    refused("12", "program.question.max_words=abc (the default question stage)", "program.question.max_words=abc",
            base=("program=archehr", *QUIET), says="program.question.max_words")
    for override in ("serve.max_concurrency=0", "serve.max_concurrency=-1", "serve.max_concurrency=abc",
                     "serve.port=abc", "serve.port=99999", "serve.max_queue=-5", "serve.timeout_s=-1",
                     "serve.max_request_bytes=-1"):
        key = override.split("=")[0]
        refused("12", override, "task=serve", override, base=(), says=f"error: {key} must be ")
    refused("13", "program.evidnce.threshold=0.4 names the closest key", "program.evidnce.threshold=0.4", base=(),
            exact="error: program.evidnce.threshold: no such key in the config; did you mean "
                  "program.evidence.threshold?")
    refused("13", "lm=gemeni names the closest option", "lm=gemeni", base=(), says="did you mean lm=gemini?")
    refused("13", "an override nested 300 levels deep (+x=[[[...]]]) is one error line", "+x=" + "[" * 300 + "]" * 300,
            base=(), says="+x: a value nested 300 levels deep")
    for value in ("abc", "-1", "0", "1.5"):
        refused("r3", f"data.limit={value}", f"data.limit={value}", says="data.limit")


def threads_probes(c: Cli) -> None:
    """#36 items 8 and 9: the threads variable is checked and never shown (the rest: tests/test_hostile_inputs.py)."""
    refused = c.refused
    for value in ("", "two", "${oc.env:HOME}"):
        refused("36", f"CLINPROG_LLAMA_THREADS={value!r} is one line that shows no value", "data.limit=1",
                base=("program=archehr", *QUIET), env={"CLINPROG_LLAMA_THREADS": value},
                exact="error: CLINPROG_LLAMA_THREADS must be an integer from 1 to 256 (or auto); its value is not shown")
    for value, shown in (("0", "0"), ("lots", "'lots'")):  # #54: a ConfigError inside Hydra's instantiate was a traceback
        refused("54", f"program.embedder.threads={value} is one line", f"program.embedder.threads={value}",
                "data.limit=1", base=("program=archehr", *QUIET),
                exact=f"error: program.embedder.threads must be an integer from 1 to 256 (or auto), not {shown}")
    for key in ("+tracking.bogus=1", "+program.embedder.bogus=1", "+lm.client.chat_format=chatml"):
        refused("r8", f"{key} (a key the built class does not take) is one line naming its settings", key,
                *(("tracking=mlflow",) if "tracking" in key else ("lm=embedded",) if "lm.client" in key else ()),
                "data.limit=1", base=("program=archehr", *QUIET), says="its settings: ")
    refused("54", "program.grounding.judge=lm under grounding=none names the options that have it",
            "program.grounding.judge=lm", base=("program=archehr", *QUIET),
            says="(the grounding stage in use); its settings: none; it belongs to")


