from __future__ import annotations

import os
from pathlib import Path

import dspy
import pytest

from signatures.constrained import ConstrainedJSONAdapter

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist workers share the cores: one llama.cpp thread each (its threads spin while they wait; 2 x 2 on 2 cores
    # ran the question-stage tests 1.7x slower)
    os.environ.setdefault("CLINPROG_LLAMA_THREADS", "1")

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


@pytest.fixture
def bundled_cases():
    from tasks.archehr.data import load_cases

    return load_cases(BUNDLED_CASES)


# Tiers (pyproject markers), one per module, set by its `pytestmark`: unit (in this process, `main.py` runs
# included), integration (real processes, HTTP servers, the browser, launchers, Ray, fault injection), lm (the
# embedded LM or a real LM server; also marked slow). A module without exactly one tier is a collection error.
TIERS = ("unit", "integration", "lm")


def pytest_collection_modifyitems(config, items):
    unmarked = set()
    for item in items:
        tiers = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
        if len(tiers) != 1:
            unmarked.add(f"{item.module.__name__}: {sorted(tiers) or 'no tier'}")
        elif tiers == {"lm"}:
            item.add_marker(pytest.mark.slow)  # the slow tier of earlier releases: -m slow still selects it
    if unmarked:
        raise pytest.UsageError("each test module needs exactly one tier: pytestmark = pytest.mark.unit | "
                                f"integration | lm; {'; '.join(sorted(unmarked))}")


@pytest.fixture(scope="session")
def llama_server():
    from lms.local_server import LlamaServer

    server = LlamaServer().start()
    yield server
    server.stop()
