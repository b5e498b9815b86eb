from __future__ import annotations

import inspect
import os
import re
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


# Tiers by cost (pyproject markers): unit (in process), integration (subprocess CLI runs, the browser, HTTP servers,
# launchers, Ray, fault injection), lm (the embedded LM, a real LM server; also marked slow). A test is integration
# when its module says so (pytestmark), it uses a server fixture, or its body starts a process.
_STARTS_A_PROCESS = re.compile(r"(?<![\w.])(run_main|main_in|main|Popen|subprocess\.(run|Popen|check_call|check_output))\(")
_SERVER_FIXTURES = {"archehr", "mediqa", "server", "served", "ray_cluster", "browser", "page"}
# modules whose every test starts a process, a server, Ray or the browser (through helpers the regex cannot see)
_INTEGRATION_MODULES = {"test_cli", "test_cli_quiet", "test_index_faults", "test_index_lock", "test_index_repair_command",
                        "test_numba_cache", "test_ray_executor", "test_report_browser", "test_run_folder_restart",
                        "test_serve", "test_serve_abuse", "test_shards_merge", "test_sweeps", "test_toy_program",
                        "test_tracking_launchers"}


def _tier(item) -> str:
    if item.get_closest_marker("embedded_lm") or item.get_closest_marker("server") or item.get_closest_marker("lm"):
        return "lm"
    if (item.get_closest_marker("integration") or item.module.__name__.rsplit(".", 1)[-1] in _INTEGRATION_MODULES
            or _SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))):
        return "integration"
    try:
        source = inspect.getsource(item.function)
    except (OSError, TypeError, AttributeError):
        return "unit"
    return "integration" if _STARTS_A_PROCESS.search(source) else "unit"


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = _tier(item)
        item.add_marker(getattr(pytest.mark, tier))
        if tier == "lm":
            item.add_marker(pytest.mark.slow)  # the slow tier of earlier releases: -m slow still selects it


@pytest.fixture(scope="session")
def llama_server():
    from lms.local_server import LlamaServer

    server = LlamaServer().start()
    yield server
    server.stop()
