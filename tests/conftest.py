from __future__ import annotations

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist workers share the cores. llama.cpp: the product's default, `auto` (the cores free at each call,
    # common/cpu.py): a fixed 2 each ran the question-stage tests 1.7x slower (its threads spin while they wait), a
    # fixed 1 left a core idle while the other worker waited on a server, Ray or a subprocess (whole suite, back to
    # back on one machine: auto 489 s / 871 CPU-s, 1 thread 515 s / 896; earlier runs 529 vs 564-573). torch/OpenMP:
    # one thread each, set before anything imports torch (2 workers x 2 OpenMP threads on 2 cores: the same in-process
    # runs took 80 s of wall time, 1 thread each 67 s; the processes the tests start inherit it)
    os.environ.setdefault("CLINPROG_LLAMA_THREADS", "auto")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402

import dspy  # noqa: E402
import pytest  # noqa: E402

from signatures.constrained import ConstrainedJSONAdapter  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
BUNDLED_CASES = ROOT / "data" / "archehr" / "bundled_cases.xml"
BUNDLED_KEY = ROOT / "data" / "archehr" / "bundled_cases_key.json"
DEV_QUESTIONS = ROOT / "data" / "archehr" / "dev_questions_2025.xml"


@pytest.fixture
def dummy_lm():
    """Configure a DummyLM that answers in JSON (the adapter our programs use) and restore settings after."""

    def make(answers):
        lm = dspy.utils.DummyLM(answers, adapter=ConstrainedJSONAdapter())
        dspy.configure(lm=lm, adapter=ConstrainedJSONAdapter())
        return lm

    yield make
    dspy.configure(lm=None, adapter=None)


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium under Playwright, one per module (tests/browser.py: the flags and the skip marker)."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, FLAGS

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def bundled_cases():
    from tasks.archehr.data import load_cases

    return load_cases(BUNDLED_CASES)


# Tiers (pyproject markers), one per module, set by its `pytestmark`: unit (in this process, `main.py` runs
# included), integration (real processes, HTTP servers, the browser, launchers, Ray, fault injection), lm (the
# embedded LM or a real LM server; also marked slow). A module without exactly one tier is a collection error.
TIERS = ("unit", "integration", "lm")


# The whole suite runs in one pytest session on the CPUs' xdist workers, one module per worker at a time
# (`--dist loadfile`), handed out in the order below (pyproject's `--no-loadscope-reorder`: xdist would otherwise sort
# modules by their number of tests, which put the Ray and LM modules, with few tests each, last): the modules of the
# process tiers (integration, lm) start before the unit ones, so that the many short unit modules fill the cores
# while the long ones (Ray, the embedded LM, Ctrl-C) run, instead of one long module running alone at the end.
# the longest modules of all, longest first (measured with --durations, benchmarks/README.md): the Ray module alone
# is ~140 s on a loaded worker; started late, it ran alone at the end of the session (test_qwen runs only where
# the 1.5B model's extra is installed: several minutes, so first)
LONGEST = ("tests.test_qwen", "tests.test_ray_executor", "tests.test_embedded_lm",
           "tests.test_lm_server", "tests.test_tracking_launchers",
           "tests.test_run_folder_restart", "tests.test_index_faults")
# the longest unit modules (3-60 s each, longest first, measured 2026-12-06 on the slower Xeon) start before the short
# ones: one of them last leaves a core idle (test_shards_merge, 20 s, ran alone at the end of a 388 s run before it was
# listed here; test_predictable, ~60 s, started at 357 s of a 416 s run and ran alone for its last 40 s)
LONGEST_UNIT = ("tests.test_predictable", "tests.test_every_knob", "tests.test_doc_commands", "tests.test_cli",
                "tests.test_first_use", "tests.test_hints", "tests.test_gguf_merge", "tests.test_hostile_inputs",
                "tests.test_config", "tests.test_no_lm_learned", "tests.test_bert_encoder", "tests.test_question_stage",
                "tests.test_archehr_no_lm", "tests.test_verifier", "tests.test_hydra_reuse", "tests.test_run_folder",
                "tests.test_merge_damaged", "tests.test_shards_merge", "tests.test_sweeps", "tests.test_run_dir_and_ray_knobs")


def pytest_collection_modifyitems(config, items):
    unmarked, tier_of = set(), {}
    for item in items:
        tiers = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
        if len(tiers) != 1:
            unmarked.add(f"{item.module.__name__}: {sorted(tiers) or 'no tier'}")
            continue
        tier_of[item.nodeid] = next(iter(tiers))
        if tiers == {"lm"}:
            item.add_marker(pytest.mark.slow)  # the slow tier of earlier releases: -m slow still selects it
    if unmarked:
        raise pytest.UsageError("each test module needs exactly one tier: pytestmark = pytest.mark.unit | "
                                f"integration | lm; {'; '.join(sorted(unmarked))}")

    def start(item: pytest.Item) -> tuple[int, bool, int]:
        name = item.module.__name__
        if name in LONGEST:
            return LONGEST.index(name), False, 0
        unit_rank = LONGEST_UNIT.index(name) if name in LONGEST_UNIT else len(LONGEST_UNIT)
        return len(LONGEST), tier_of[item.nodeid] == "unit", unit_rank

    items.sort(key=start)  # stable: a module's tests keep their order
