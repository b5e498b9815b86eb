"""`executor=ray`: a run's pending items on Ray workers that each build the program once; the records stream back to
the driver (docs/scaling.md). A worker that dies is replaced once and its items in flight go back to the queue once;
what is left stays for the rerun to resume."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from common.errors import ClinprogError, ConfigError
from common.outputs import output_dir
from common.settings import RaySettings, settings
from runners.executors import Save

log = logging.getLogger(__name__)
REPLACEMENTS = 1  # a worker that dies is replaced once; its in-flight items are re-queued once


@dataclass
class Slot:
    """One worker: its actor, how many items it holds, and how often it died."""

    index: int
    actor: Any
    busy: int = 0
    deaths: int = 0
    where: str = ""

    @property
    def alive(self) -> bool:
        return self.deaths <= REPLACEMENTS


def ray_settings(**given: Any) -> dict[str, Any]:
    """executor.* of executor=ray, checked by its schema (common/settings.py)."""
    return settings({"executor": given}, "executor", RaySettings).model_dump()


class RayExecutor:
    # each worker builds the program (a bad config or a dead LM server fails in its ready(), as the same one line)
    builds_own_program = True

    def __init__(self, cfg: DictConfig, unit: str = "item", **settings: Any) -> None:
        self.unit = unit
        self.settings = ray_settings(**settings)
        self.config = OmegaConf.to_container(cfg, resolve=True)  # what every worker builds from
        limits = cfg.lm.get("rate_limit") or {}
        self.limits = (limits.get("rpm"), limits.get("tpm")) if limits.get("rpm") or limits.get("tpm") else None
        self.where = ""  # "a local Ray (...)" or "the Ray cluster at ..." once connected

    # --- the cluster --------------------------------------------------------------------------------------------
    def _connect(self, ray: Any) -> bool:
        """Join `address`, or start a local Ray; True when this run started it (and so stops it)."""
        s = self.settings
        if ray.is_initialized():  # a caller (a notebook, a test) already connected this process
            self.where = f"the Ray this process is connected to ({ray.get_runtime_context().gcs_address})"
            return False
        common = {"namespace": "clinprog", "log_to_driver": False, "logging_level": logging.WARNING,
                  "configure_logging": False}
        try:
            if s["address"]:
                ray.init(address=str(s["address"]), **common)
                cpus = ray.cluster_resources().get("CPU", 0)
                self.where = (f"the Ray cluster at {s['address']} ({len(ray.nodes())} nodes, {cpus:g} CPUs)")
                return False
            cpus = max(1, round(s["num_workers"] * s["cpus_per_worker"]))
            # Ray turns token auth on for a new local cluster (as it should) and warns about it on the console
            logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
            ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=s["object_store_mb"] << 20, **common)
        except ConnectionError as exc:
            raise ConfigError(f"executor.address={s['address']}: cannot join a Ray cluster there ({exc})") from None
        self.where = f"a local Ray started for this run ({cpus} CPUs, {ray.get_runtime_context().gcs_address})"
        return True

    def _start_workers(self, ray: Any, num_threads: int) -> tuple[list[Slot], Any, Callable[[], Any]]:
        from lms.rate_limit import RateLimiter
        from runners.executors.program_worker import ProgramWorker

        limiter = None
        if self.limits:
            limiter = ray.remote(RateLimiter).options(num_cpus=0).remote(*self.limits)
        worker = ray.remote(ProgramWorker).options(num_cpus=self.settings["cpus_per_worker"], max_restarts=0,
                                                   max_concurrency=max(1, num_threads))

        def new_worker() -> Any:
            return worker.remote(self.config, os.getcwd(), limiter)

        slots = [Slot(i, new_worker()) for i in range(self.settings["num_workers"])]
        try:
            places = ray.get([slot.actor.ready.remote() for slot in slots])
        except ray.exceptions.RayTaskError as exc:  # the build failed: the same one line a local run gives
            raise _cause(exc) from None
        except ray.exceptions.RayActorError as exc:
            raise ClinprogError(f"executor=ray: a worker could not start ({_first_line(exc)})") from None
        for slot, place in zip(slots, places, strict=True):
            slot.where = _where(place)
        limit = f"; lm.rate_limit rpm={self.limits[0]} tpm={self.limits[1]} shared by all workers" if self.limits else ""
        log.info("executor=ray: %d workers x %d thread(s) on %s%s", len(slots), max(1, num_threads), self.where,
                 limit)
        for slot in slots:
            log.info("ray worker %d: %s", slot.index, slot.where)
        return slots, limiter, new_worker

    # --- the items ----------------------------------------------------------------------------------------------
    def run(self, todo: Sequence[Any], run_one: Callable[[Any], dict[str, Any]], save: Save, num_threads: int) -> None:
        """`run_one` is the driver's own and is not used: every worker builds its program from the config."""
        try:
            import ray
        except ImportError:
            raise ConfigError('executor=ray needs Ray: pip install -e ".[ray]"') from None
        started = self._connect(ray)
        slots: list[Slot] = []
        limiter = None
        try:
            slots, limiter, new_worker = self._start_workers(ray, num_threads)
            self._dispatch(ray, slots, new_worker, list(todo), save, depth=max(1, num_threads) + 1)
        finally:
            # Ctrl-C or an error: this run's work stops on the cluster too; what is already gone must not hide why
            for actor in [s.actor for s in slots] + ([limiter] if limiter is not None else []):
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
            if started:
                with contextlib.suppress(Exception):
                    ray.shutdown()

    def _dispatch(self, ray: Any, slots: list[Slot], new_worker: Callable[[], Any], todo: list[Any], save: Save,
                  depth: int) -> None:
        queue = collections.deque(todo)
        in_flight: dict[Any, tuple[Slot, int, Any]] = {}  # ref -> (worker, its deaths when sent, item)
        starting: dict[Any, Slot] = {}  # ready() of a replacement worker -> its slot
        requeued: set[int] = set()
        lost: list[Any] = []
        while True:
            for slot in slots:  # keep every live worker `depth` items deep
                while slot.alive and slot.busy < depth and queue:
                    item = queue.popleft()
                    in_flight[slot.actor.run.remote(item)] = (slot, slot.deaths, item)
                    slot.busy += 1
            if not in_flight:
                break
            # bounded: Ctrl-C is raised only when the wait returns to Python
            ready, _ = ray.wait([*in_flight, *starting], num_returns=1, timeout=0.5)
            for ref in ready:
                if ref in starting:  # a replacement came up (or failed: its items fail too and are handled there)
                    slot = starting.pop(ref)
                    try:
                        slot.where = _where(ray.get(ref))
                        log.info("ray worker %d replaced: %s", slot.index, slot.where)
                    except ray.exceptions.RayError as exc:
                        log.warning("ray worker %d: its replacement did not start (%s)", slot.index, _first_line(exc))
                    continue
                slot, deaths, item = in_flight.pop(ref)
                slot.busy -= 1
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    if deaths == slot.deaths:  # the first of this death's failed items: count the death once
                        self._replace(ray, slot, new_worker, starting, exc)
                    if id(item) in requeued:
                        lost.append(item)
                    else:
                        requeued.add(id(item))
                        queue.appendleft(item)
                except ray.exceptions.RayTaskError as exc:  # the item's own error, as a local run raises it
                    raise _cause(exc) from None
                else:
                    save(item, record)
        if lost or queue:
            left = len(lost) + len(queue)
            why = "every Ray worker died" if queue else "their Ray workers died twice"
            resume = shlex.quote(f"hydra.run.dir={output_dir()}")
            raise ClinprogError(f"executor=ray: {left} {self.unit}s were not run ({why}); the records saved so far are "
                                f"kept: rerun the same command with {resume} to resume them")

    @staticmethod
    def _replace(ray: Any, slot: Slot, new_worker: Callable[[], Any], starting: dict[Any, Slot],
                 exc: Exception) -> None:
        slot.deaths += 1
        with contextlib.suppress(Exception):  # gone already, or unreachable: it must not come back beside its twin
            ray.kill(slot.actor, no_restart=True)
        then = "a fresh worker takes its place" if slot.alive else "it is not replaced again"
        log.warning("ray worker %d (%s) died (%s): its items in flight go back to the queue once; %s", slot.index,
                    slot.where, _first_line(exc), then)
        if slot.alive:
            slot.actor = new_worker()
            starting[slot.actor.ready.remote()] = slot


def _where(place: dict[str, Any]) -> str:
    return f"pid {place['pid']} on {place['host']} ({place['node']})"


def _cause(exc: Exception) -> Exception:
    """The worker's own exception inside Ray's wrapper (a ClinprogError stays one error line)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else ClinprogError(_first_line(exc))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
