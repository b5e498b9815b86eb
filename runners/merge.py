"""task=merge dirs=[SHARD0,SHARD1,...]: one run folder from the shard runs of a job array, equal to the unsharded run.
Checked first, each problem one `error:` line: the folders are finished shards of one run and input, covering every
item exactly once with usable records."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from common import json_input
from common.errors import ClinprogError, ConfigError
from common.files import file_sha256
from common.logs import printable
from common.outputs import output_dir, write_text
from common.prediction_log import PredictionLog
from common.run_folder import RunFolder, differences, shard_folder_clash
from runners.shards import SHARD_KEYS, bounds, shard_of

log = logging.getLogger(__name__)


class MergeError(ClinprogError):
    """Shards that do not make one run (each problem on its own `error:` line)."""


@dataclass
class Shard:
    dir: Path
    config: dict[str, Any]
    fingerprint: dict[str, Any]
    shard: int
    num_shards: int

    def same_run(self) -> dict[str, Any]:
        """What must be equal across the shards of one run: the fingerprint, and data.* but the shard keys."""
        data = {k: v for k, v in (self.config.get("data") or {}).items() if k not in SHARD_KEYS}
        return {"fingerprint": self.fingerprint, "program.name": (self.config.get("program") or {}).get("name"),
                "data": data, "data.num_shards": self.num_shards}


def json_kind(value: Any) -> str:
    """What a JSON value is, as JSON names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string"}.get(type(value), "number")


def shape_problem(name: str, value: Any) -> str | None:
    """Why a shard's config.json or fingerprint.json is not what a run writes, or None."""
    if not isinstance(value, dict):
        return f"a JSON {json_kind(value)}, not an object"
    if name == "fingerprint.json":
        inputs = value.get("inputs", {})
        return None if isinstance(inputs, dict) else f"its inputs are a JSON {json_kind(inputs)}, not an object"
    for key in ("data", "program"):
        if key not in value:
            return f"no {key} object"
        if not isinstance(value[key], dict):
            return f"its {key} is a JSON {json_kind(value[key])}, not an object"
    if not isinstance(value["program"].get("contract"), dict):
        return "its program names no contract object"
    return None


def read_shard(folder: Path) -> Shard:
    if not folder.is_dir():
        raise MergeError(f"{folder}: no such run folder")
    files = {}
    for name in ("config.json", "fingerprint.json"):
        try:
            files[name] = json_input.loads((folder / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise MergeError(f"{folder}: no {name}: not a finished run folder (an interrupted shard resumes when its "
                             "command is run again)") from None
        except ValueError as exc:
            raise MergeError(f"{folder}/{name}: not JSON ({exc})") from None
        problem = shape_problem(name, files[name])
        if problem:
            raise MergeError(f"{folder}/{name}: not the {name} a run writes ({problem})")
    try:
        shard, num = shard_of(OmegaConf.create(files["config.json"]))
    except ConfigError as exc:
        raise MergeError(f"{folder}: {exc}") from None
    return Shard(folder, files["config.json"], files["fingerprint.json"], shard, num)


def damaged_records(folder: Path, k: int, num: int, size: int, unit: str, damaged: list[tuple[str, str]]) -> str:
    """The error line of a shard whose predictions.jsonl holds records the outputs cannot be made from."""
    named = "; ".join(f"{printable(i, limit=80)} {why}" for i, why in damaged[:5]) + (" ..." if len(damaged) > 5 else "")
    these = "that line" if len(damaged) == 1 else "those lines"
    return (f"damaged records: {folder} (shard {k} of {num}) holds {len(damaged)} of its {size} {unit}s' records "
            f"without what the outputs are made from ({unit} {named}); delete {these} from its predictions.jsonl and "
            "rerun that shard's command to run them again")


def merge(cfg: DictConfig) -> float | None:
    """task=merge"""
    from runners.program import contract_for, finish

    dirs = cfg.get("dirs")
    if not dirs or isinstance(dirs, str):
        raise ConfigError("task=merge needs dirs=[RUN0,RUN1,...]: the run folders of data.shard=0..N-1 "
                          "(with data.num_shards=N)")
    out = output_dir()
    clash = shard_folder_clash(out, dirs)  # a caller without Hydra's RunFolderCallback
    if clash:
        raise MergeError(clash)
    problems: list[str] = []
    shards: list[Shard] = []
    for d in dirs:
        try:
            shards.append(read_shard(Path(str(d))))
        except MergeError as exc:
            problems.append(str(exc))
    if problems:
        raise MergeError("\nerror: ".join(problems))
    first = shards[0]
    one_run = [s for s in shards if s.same_run() == first.same_run()]
    for s in shards:
        if s not in one_run:  # a foreign shard: another config, another input, or another N
            problems.append(f"{s.dir} is a shard of another run than {first.dir} "
                            f"({'; '.join(differences(first.same_run(), s.same_run()))})")

    run_cfg = OmegaConf.create(first.config)
    with open_dict(run_cfg):
        run_cfg.data.num_shards, run_cfg.data.shard = 1, 0  # the unsharded run these shards make
    contract = contract_for(run_cfg)
    inputs = contract.load(run_cfg)
    changed = [name for name, path in sorted(inputs.files.items())
               if first.fingerprint.get("inputs", {}).get(name) not in (None, file_sha256(path))]
    if changed:
        problems.append(f"the input files {changed} changed since the shards ran ({', '.join(inputs.files[n] for n in changed)})")

    num, ids = first.num_shards, [contract.item_id(i) for i in inputs.items]
    records: dict[str, dict[str, Any]] = {}
    for k in range(num):
        start, stop = bounds(len(ids), k, num)
        holders = [s for s in one_run if s.shard == k]
        span = f"{contract.unit}s {start + 1}-{stop} of {len(ids)}" if stop > start else f"no {contract.unit}s"
        if not holders:
            problems.append(f"a gap: shard {k} of {num} ({span}) is in none of dirs; run it (data.shard={k}) and "
                            "merge again")
            continue
        if len(holders) > 1:
            problems.append(f"an overlap: shard {k} of {num} is in {len(holders)} folders "
                            f"({', '.join(str(s.dir) for s in holders)}); keep one")
            continue
        saved = PredictionLog(holders[0].dir / "predictions.jsonl", contract.record_id).read()
        missing = [i for i in ids[start:stop] if i not in saved]
        if missing:
            problems.append(f"a gap: {holders[0].dir} (shard {k} of {num}) lacks {len(missing)} of its "
                            f"{stop - start} {contract.unit}s ({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}): "
                            "rerun that shard's command to resume it")
        damaged = [(i, why) for i in ids[start:stop] if i in saved and (why := contract.record_problem(saved[i]))]
        if damaged:
            problems.append(damaged_records(holders[0].dir, k, num, stop - start, contract.unit, damaged))
        records.update({i: saved[i] for i in ids[start:stop] if i in saved})
    if problems:
        raise MergeError("\nerror: ".join(problems))

    with RunFolder(out, first.fingerprint) as folder:
        ordered = [records[i] for i in ids]
        write_text(folder.predictions, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ordered))
        scores = finish(run_cfg, contract, inputs, ordered)
    log.info("merged %d shards of %s: %d %ss", num, first.dir.parent, len(ordered), contract.unit)
    print(f"merged {num} shards: {len(ordered)} {contract.unit}s; outputs: {out}")
    return contract.objective(scores)
