"""Threads change speed only: the question stage's candidates on 1 and 2 threads, and the embedder's vectors on 1,
2 and 3 threads in one process per kernel set (tests/thread_invariance.py; the
libraries read their instruction caps when they load, so each set needs a process of its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tasks.archehr.data import load_cases
from tests.builders import archehr_stage
from tests.conftest import ROOT
from tests.test_predictable import CASES, candidates

pytestmark = pytest.mark.integration


# Kernel sets one machine can be made to take (the others' code paths): torch's dispatch level, MKL's and oneDNN's
# instruction caps. The CPU this ran on first used AVX2; the Xeon where 1 and 2 threads gave other bits, AVX-512.
KERNEL_SETS = {"DEFAULT": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                           "ONEDNN_MAX_CPU_ISA": "SSE41"},
               "AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
               "AVX512": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512",
                          "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}}


def supported_kernel_sets() -> list[str]:
    """The kernel sets up to this CPU's best (torch refuses a capability the CPU lacks)."""
    import torch

    best = torch.backends.cpu.get_cpu_capability()
    order = list(KERNEL_SETS)
    return order[: order.index(best) + 1] if best in order else order[:1]


def test_the_thread_count_changes_no_candidate_and_no_vector_under_any_kernel_set():
    # threads: auto picks the free cores at each step (common/cpu.py): that must change speed only
    message = load_cases(CASES)[2].patient_narrative
    one, two = (archehr_stage("question", "finetuned", f"program.question.threads={n}") for n in (1, 2))
    assert candidates(one, message) == candidates(two, message)
    # the embedder's vectors on 1, 2 and 3 threads, one process per kernel set
    # (the libraries read the caps when they load); started together, read in turn
    sets = supported_kernel_sets()
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    procs = {name: subprocess.Popen([sys.executable, "-m", "tests.thread_invariance"], cwd=ROOT, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**env, **KERNEL_SETS[name]})
             for name in sets}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        result = json.loads(out.strip().splitlines()[-1])
        assert result["capability"] == name, result  # the cap took effect
        assert result["vectors_equal"], (name, result)
