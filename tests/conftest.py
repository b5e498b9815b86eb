from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # offline, as the `python main.py` processes tests/cli.py starts

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


# Tiers (pyproject markers), one per module, set by its `pytestmark`: unit (in this process, runs composed and
# dispatched; a few short `python main.py` processes), integration (real processes, HTTP servers, the browser,
# launchers, Ray, fault injection), lm (the embedded LM or a real LM server; also marked slow). A module without
# exactly one tier is a collection error.
TIERS = ("unit", "integration", "lm")


def pytest_collection_modifyitems(config, items):
    unmarked = set()
    for item in items:
        tiers = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
        if len(tiers) != 1:
            unmarked.add(f"{item.module.__name__}: {sorted(tiers) or 'no tier'}")
            continue
        if tiers == {"lm"}:
            item.add_marker(pytest.mark.slow)  # the slow tier of earlier releases: -m slow still selects it
    if unmarked:
        raise pytest.UsageError("each test module needs exactly one tier: pytestmark = pytest.mark.unit | "
                                f"integration | lm; {'; '.join(sorted(unmarked))}")

