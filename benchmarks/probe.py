"""The hostile probe: `python benchmarks/probe.py [--jobs 2] [--only TEXT[,TEXT...]] [--times] [--keep]`.

The probes themselves live in benchmarks/probes/, one module per area (its __init__.py says which); this file is the
command the docs name, and what the probe's worker processes run (`probe.py --worker`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.probes.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
