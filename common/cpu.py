"""How many threads a CPU-bound step should use now: llama.cpp and torch meet at a barrier after every operation, so
one descheduled thread stalls them all (on 2 cores beside two busy processes a run took 4.45x its time alone).
Results never depend on the thread count: torch runs each product on one thread, the step's threads get batches."""

from __future__ import annotations

import os

from common.errors import ConfigError, number_in

MAX_THREADS = 256
THREADS_ENV = "CLINPROG_LLAMA_THREADS"


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's or taskset's limit)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _running_here() -> int:
    """Runnable threads of this process (an OpenMP worker still spinning is ours, not other work)."""
    count = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        count += state == b"R"
    return max(1, count)


def running_elsewhere(samples: int = 3) -> int:
    """Runnable threads outside this process: the fewest of `samples` reads (a thread runnable for an instant is not
    load); 0 when unknown."""
    seen: int | None = None
    for _ in range(samples):
        try:
            with open("/proc/stat", "rb") as stat:
                for line in stat:
                    if line.startswith(b"procs_running"):
                        now = max(0, int(line.split()[1]) - _running_here())
                        seen = now if seen is None else min(seen, now)
                        break
        except (OSError, ValueError, IndexError):
            return 0
    return seen or 0


def threads_now(setting: int | str = "auto") -> int:
    """Threads for the next step: `setting` when it is a number, else ("auto") the free cores now, at least 1."""
    if setting != "auto":
        return int(setting)
    return max(1, usable_cores() - running_elsewhere())


def threads_setting(value: object, where: str) -> int | str:
    """A threads setting as written in a config: "auto" or a whole number from 1 to 256; else one line."""
    if value == "auto":
        return "auto"
    return number_in(where, value, 1, MAX_THREADS, integer=True, note="or auto")


def threads_from_environment(default: str = "auto") -> int | str:
    """The `clinprog.threads` resolver: $CLINPROG_LLAMA_THREADS ("auto" or a whole number), else `default`. An error
    never echoes the value (it could hold anything)."""
    raw = os.environ.get(THREADS_ENV)
    if raw is None:
        return default
    text = raw.strip()
    if text == "auto":
        return "auto"
    if text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_THREADS:
        return int(text)
    raise ConfigError(f"{THREADS_ENV} must be an integer from 1 to {MAX_THREADS} (or auto); its value is not shown")


def register_resolver() -> None:
    """`${clinprog.threads:}` in configs; a plain resolver, so the variable is never parsed as config grammar."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("clinprog.threads"):
        OmegaConf.register_new_resolver("clinprog.threads", threads_from_environment, use_cache=False)


def omp_limit() -> int:
    """The most threads torch may use: $OMP_NUM_THREADS when it is a positive whole number, else the usable cores."""
    raw, cores = os.environ.get("OMP_NUM_THREADS", "").strip(), usable_cores()
    return max(1, min(int(raw), cores)) if raw.isascii() and raw.isdigit() and int(raw) > 0 else cores


def threads_for_step(setting: int | str = "auto") -> int:
    """Workers for the next torch step: `setting` when it is a number, else the free cores now (at most `omp_limit()`)."""
    return int(setting) if setting != "auto" else min(omp_limit(), threads_now("auto"))


def single_thread_products() -> None:
    """Run torch's products on one intra-op thread from the calling thread on (OpenMP's count is per thread, so a pool
    thread calls this itself): a product's summation order is then the same whatever the thread count."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)

