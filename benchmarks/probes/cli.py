"""The command-line probes: each section registers its checks with `Cli.job`; `cli_probes` orders them for the
pool (the merges after their shards, the slowest commands last)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from benchmarks.probes.cli_refusals import (
    compile_refusals_probes,
    inputs_probes,
    settings_probes,
    state_files_probes,
    threads_probes,
)
from benchmarks.probes.cli_runs import (
    batch_probes,
    fabrications_probes,
    forged_ids_probes,
    merges_probes,
    multirun_probes,
)
from benchmarks.probes.harness import BASE, Files, Report, clinprog, one_error


class Cli:
    """What every command-line probe section shares: the report, the temporary files, the filter, and the job lists
    (the slow ones last, the merges after the shards)."""

    def __init__(self, report: Report, files: Files, only: Callable[[str, str], bool]) -> None:
        self.report, self.files, self.only, self.tmp = report, files, only, files.tmp
        self.jobs: list[Callable[[], None]] = []
        self.late: list[Callable[[], None]] = []  # the merges: queued after the rest, so that their shards are ready
        self.slow: list[Callable[[], None]] = []  # the longest commands: last, so that the server's timing checks
        # (which wait for the commands in flight) do not wait for them
        self.ready = threading.Event()  # set when the shards' job has ended

    def job(self, item: str, what: str, after_shards: bool = False, last: bool = False):
        def register(check: Callable[[], None]) -> Callable[[], None]:
            if self.only(item, what):
                def run() -> None:
                    self.report.add(item, what, check)
                run.shards = check.__name__ == "make_shards"  # type: ignore[attr-defined]
                (self.late if after_shards else self.slow if last else self.jobs).append(run)
            return check
        return register

    def run_dir(self, tag: str) -> str:
        return f"hydra.run.dir={self.tmp / 'runs' / tag}"

    def refused(self, item: str, what: str, *args: str, says: str | None = None, exact: str | None = None,
                base: tuple[str, ...] = BASE, env: dict[str, str] | None = None) -> None:
        tag = re.sub(r"[^A-Za-z0-9]+", "_", what)[:60] + f"_{len(self.jobs)}"

        @self.job(item, what)
        def check() -> None:
            multirun = ("-m",) if "-m" in args else ()
            rest = [a for a in args if a != "-m"]
            folder = () if any(a.startswith("hydra.run.dir=") for a in rest) else (self.run_dir(tag),)
            one_error(clinprog(*multirun, *base, *rest, *folder, env=env), says=says, exact=exact)


def cli_probes(report: Report, files: Files, only: Callable[[str, str], bool]) -> list[Callable[[], None]]:
    """Each command-line probe as a job for the pool (the slow ones first)."""
    c = Cli(report, files, only)
    for section in (multirun_probes, batch_probes, fabrications_probes, merges_probes, forged_ids_probes,
                    state_files_probes, compile_refusals_probes, inputs_probes, settings_probes, threads_probes):
        section(c)
    if not any(getattr(j, "shards", False) for j in c.jobs):
        c.ready.set()  # the shards' job is not among these (--only): the merges fail at once
    return c.jobs + c.late + c.slow


