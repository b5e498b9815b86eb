"""common/hydra_reuse.py: a composition that reuses a kept defaults tree and merge is the config Hydra composes by
itself (values, flags, errors), and an edited or added config file or a new ConfigStore entry is composed afresh."""

from __future__ import annotations

import os

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf

from common import hydra_reuse
from tests.conftest import ROOT

pytestmark = pytest.mark.unit
CONF = ROOT / "conf"
TOY = f"hydra.searchpath=[file://{ROOT / 'tests' / 'toy_program' / 'conf'}]"
# group choices, value overrides, additions, deletions, an experiment, a launcher, another search path, errors; a
# sweep's compositions (MULTIRUN: missing choices skipped) for three of them
RUN, MULTI = RunMode.RUN, RunMode.MULTIRUN
COMPOSITIONS = [
    ([], RUN), ([], MULTI), (["program=mediqa_corr", "lm=embedded"], RUN),
    (["experiment=no_lm_best", "hydra.run.dir=/tmp/x"], MULTI),
    (["program/archehr/evidence=embedding", "program.evidence.top_share=0.4"], RUN),
    (["+lm.roles.alignment={n_ctx: 512}", "~embedder"], RUN), (["hydra/launcher=joblib", "data.limit=2"], MULTI),
    (["program=fever", TOY], RUN), (["lm=gemnii"], RUN), (["program.evidence.no_such_knob=1"], RUN),
    (["program=archehr", "program/archehr/evidence=nope"], RUN),
]


def composed(overrides: list[str], mode: RunMode, config_dir=CONF) -> tuple[str, str]:
    """(the config as YAML with its root and hydra flags, or the error Hydra raised)."""
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = GlobalHydra.instance().hydra.compose_config(
                config_name="config", overrides=list(overrides), with_log_configuration=False, run_mode=mode,
                validate_sweep_overrides=mode == RunMode.RUN)
    except Exception as exc:  # noqa: BLE001 - the error is part of what must match
        return "error", f"{type(exc).__name__}: {exc}"
    return OmegaConf.to_yaml(cfg), f"{cfg._get_flag('struct')} {cfg.hydra._get_flag('readonly')}"


@pytest.fixture
def hydra_alone():
    """Hydra's own composition for the test, then this process's setting again."""
    was = bool(hydra_reuse._ORIGINALS)
    hydra_reuse.uninstall()
    yield
    if was:
        hydra_reuse.install()


def test_a_reused_tree_and_merge_compose_what_hydra_composes_alone(hydra_alone):
    expected = [composed(overrides, mode) for overrides, mode in COMPOSITIONS]
    assert hydra_reuse.install()
    for _ in range(2):  # the first round fills the store, the second reuses it
        for (overrides, mode), alone in zip(COMPOSITIONS, expected, strict=True):
            assert composed(overrides, mode) == alone, (overrides, mode)
    assert hydra_reuse._TREES and hydra_reuse._MERGED
    # another value over a kept tree and merge is applied, and the kept merge is not edited by it
    assert OmegaConf.to_yaml(compose_once(["data.limit=5"]).data) != OmegaConf.to_yaml(compose_once([]).data)
    assert compose_once(["data.limit=5"]).data.limit == 5 and compose_once([]).data.limit != 5


def compose_once(overrides: list[str], config_dir=CONF):
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def test_an_edited_or_added_file_and_a_new_config_store_entry_are_composed_afresh(tmp_path, hydra_alone):
    assert hydra_reuse.install()
    (tmp_path / "db").mkdir()
    (tmp_path / "config.yaml").write_text("defaults:\n  - db: a\n  - _self_\nname: x\n")
    (tmp_path / "db" / "a.yaml").write_text("port: 1\n")
    assert compose_once([], tmp_path).db.port == 1
    (tmp_path / "db" / "a.yaml").write_text("port: 22\n")
    os.utime(tmp_path / "db" / "a.yaml", ns=(1, 1))  # whatever the clock's resolution: another mtime
    assert compose_once([], tmp_path).db.port == 22
    (tmp_path / "db" / "b.yaml").write_text("port: 3\n")
    assert compose_once(["db=b"], tmp_path).db.port == 3
    ConfigStore.instance().store(group="db", name="c", node={"port": 4})
    try:
        assert compose_once(["db=c"], tmp_path).db.port == 4
        ConfigStore.instance().store(group="db", name="c", node={"port": 5})  # the same name, a new node
        assert compose_once(["db=c"], tmp_path).db.port == 5
    finally:
        ConfigStore.instance().repo.get("db", {}).pop("c.yaml", None)
