from __future__ import annotations

import os
from pathlib import Path

import dspy
import pytest

from signatures.constrained import ConstrainedJSONAdapter

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


@pytest.fixture
def bundled_cases():
    from tasks.archehr.data import load_cases

    return load_cases(BUNDLED_CASES)


def pytest_collection_modifyitems(config, items):
    """The slow tier (`-m slow`): the embedded LM and real LM servers; everything else is the fast tier."""
    for item in items:
        if item.get_closest_marker("embedded_lm") or item.get_closest_marker("server"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def llama_server():
    from lms.local_server import LlamaServer

    server = LlamaServer().start()
    yield server
    server.stop()
