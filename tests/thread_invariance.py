"""`python -m tests.thread_invariance`: the torch steps' outputs on 1, 2 and 3 threads, compared bit for bit in this
process; prints one JSON line. Run by tests/test_predictable.py under each CPU kernel set the machine supports (torch's
ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA are read when the libraries load: one process each)."""

from __future__ import annotations

import json
import sys

import numpy as np


def main() -> None:
    import torch

    from tasks.archehr.data import load_cases
    from tests.builders import shared_embedder
    from tests.conftest import ROOT

    cases = load_cases(ROOT / "data" / "archehr" / "realistic_cases_b.xml")
    texts = [s.text for c in cases[3:5] for s in c.sentences]
    embedder = shared_embedder()
    vectors = []
    for threads in (1, 2, 3):
        embedder.threads = threads
        vectors.append(embedder._vectors(embedder._load(), texts))
    print(json.dumps({
        "capability": torch.backends.cpu.get_cpu_capability(),
        "texts": len(texts),
        "vectors_equal": all(np.array_equal(vectors[0], v) for v in vectors[1:]),
    }))


if __name__ == "__main__":
    sys.exit(main())
