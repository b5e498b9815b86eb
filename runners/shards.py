"""Job arrays: `data.num_shards=N data.shard=K` runs the K-th of N contiguous slices of a run's inputs (after
data.limit), so a Slurm/submitit array runs one slice per job; `task=merge` (runners/merge.py) joins them."""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import DictConfig

from common.contract import Inputs, ProgramContract
from common.errors import number_in
from common.logs import printable

log = logging.getLogger(__name__)
SHARD_KEYS = ("num_shards", "shard")  # data.* keys that differ between the shards of one run


def shard_of(cfg: DictConfig) -> tuple[int, int]:
    """(data.shard, data.num_shards), checked: one error line for a value that cannot work."""
    data = cfg.get("data") or {}
    num = number_in("data.num_shards", data.get("num_shards", 1), 1, integer=True, note="1: no sharding")
    return number_in("data.shard", data.get("shard", 0), 0, num - 1, integer=True, note=f"data.num_shards={num}"), num


def bounds(count: int, shard: int, num_shards: int) -> tuple[int, int]:
    """[start, stop) of slice `shard` of `num_shards` over `count` items: contiguous, sizes differ by at most one."""
    return shard * count // num_shards, (shard + 1) * count // num_shards


def select_shard(cfg: DictConfig, contract: ProgramContract, inputs: Inputs[Any]) -> Inputs[Any]:
    """This run's slice of `inputs` (items and references cut alike); all of them when data.num_shards=1."""
    shard, num = shard_of(cfg)
    if num == 1:
        return inputs
    start, stop = bounds(len(inputs.items), shard, num)
    part = inputs.items[start:stop]
    if part:
        log.info("data.shard=%d of data.num_shards=%d: %ss %d-%d of %d (%s .. %s)", shard, num, contract.unit,
                 start + 1, stop, len(inputs.items), printable(contract.item_id(part[0])),
                 printable(contract.item_id(part[-1])))
    else:
        log.warning("data.shard=%d of data.num_shards=%d: no %ss (only %d in the inputs)", shard, num, contract.unit,
                    len(inputs.items))
    return contract.subset(inputs, {contract.item_id(i) for i in part})
