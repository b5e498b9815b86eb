"""Where clinprog keeps model files it makes (merged adapters, models joined from parts): one folder per user."""

from __future__ import annotations

import os
from pathlib import Path


def merge_cache_dir() -> Path:
    """Where merged and joined GGUFs are kept: $CLINPROG_MODEL_CACHE, else ~/.cache/clinprog/models."""
    return Path(os.environ.get("CLINPROG_MODEL_CACHE") or Path.home() / ".cache" / "clinprog" / "models")
