"""Renamed public names keep working for one release (common/aliases.py): every alias composes to the same config as
its new name, through the command line too, with one `deprecated:` line naming the new name."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from common.aliases import ALIASES, Alias, renamed, rewrite
from common.config_groups import CONF, compose_config, options
from tests.cli import run_main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
IDS = [a.before for a in ALIASES]


def _leaf(key: str) -> str:
    """The first key below `key` in the default config that holds a value (`program.module._target_`)."""
    node = OmegaConf.select(compose_config(), key)
    while OmegaConf.is_dict(node):
        first = next(iter(node))
        key, node = f"{key}.{first}", node[first]
    return key


def _overrides(alias: Alias) -> tuple[str, str]:
    """(the override with the old name, the same with the new one): `group=old` / `group=new` for an option, a value
    for a leaf below the key for a key."""
    if alias.group is not None:
        return alias.before, alias.after
    leaf = _leaf(alias.new)
    return f"{alias.old}{leaf[len(alias.new):]}=alias-probe", f"{leaf}=alias-probe"


@pytest.mark.parametrize("alias", ALIASES, ids=IDS)
def test_the_new_name_exists_and_the_old_one_is_no_longer_a_name_of_its_own(alias):
    """An alias never hides a real option or key: the old name is gone from conf/, the new one is there."""
    if alias.group is not None:
        assert (CONF / alias.group).is_dir()
        assert alias.new in options(alias.group) and alias.old not in options(alias.group)
    else:
        default = compose_config()
        assert OmegaConf.select(default, alias.new) is not None and OmegaConf.select(default, alias.old) is None


@pytest.mark.parametrize("alias", ALIASES, ids=IDS)
def test_every_alias_composes_to_the_config_of_its_new_name(alias):
    old, new = _overrides(alias)
    rewritten, used = rewrite([old])
    assert rewritten == [new] and used == [alias]
    base = ("program=archehr", "lm=none")
    assert compose_config(*base, *rewritten) == compose_config(*base, new)
    if alias.group is None:
        assert OmegaConf.select(compose_config(*base, *rewritten), new.split("=")[0]) == "alias-probe"


@pytest.mark.parametrize("alias", ALIASES, ids=IDS)
def test_the_command_line_takes_the_old_name_with_one_deprecation_line(alias):
    """Through `main.py` itself (`--cfg job`: Hydra composes and prints the config, nothing runs): the same config as
    the new name, and stderr is exactly the one line naming it."""
    old, new = _overrides(alias)
    with_old = run_main(old, "--cfg", "job")
    with_new = run_main(new, "--cfg", "job")
    assert with_new.returncode == 0 and with_new.stderr == "", with_new.stderr
    assert with_old.returncode == 0, with_old.stderr
    assert with_old.stderr == alias.line() + "\n"
    assert with_old.stdout == with_new.stdout



def test_experiment_offline_best_runs_with_one_deprecation_line_and_resumes_as_no_lm_best(tmp_path):
    """Issue #52's case end to end (one bundled case; the question stage is not the point here): the run records the
    new name, so the same folder resumes under it."""
    run = tmp_path / "run"
    proc = run_main("experiment=offline_best", "program/archehr/question=baseline", "data.limit=1",
                    f"hydra.run.dir={run}", quiet=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [ALIASES[0].line()]
    assert json.loads((run / "config.json").read_text())["choices"]["experiment"] == "no_lm_best"
    assert "- experiment=no_lm_best" in (run / ".hydra" / "overrides.yaml").read_text().splitlines()
    again = run_main("experiment=no_lm_best", "program/archehr/question=baseline", "data.limit=1",
                     f"hydra.run.dir={run}", quiet=True)
    assert again.returncode == 0 and "deprecated" not in again.stderr, again.stderr
    assert len((run / "predictions.jsonl").read_text().splitlines()) == 1

def test_the_line_names_the_new_name_and_is_printed_once_per_name():
    err = io.StringIO()
    argv = renamed(["-m", "program=archehr", "experiment=offline_best,compile_heads", "stages=offline",
                    "+experiment=offline_best"], stream=err)
    assert argv == ["-m", "program=archehr", "experiment=no_lm_best,compile_heads", "stages=no_lm",
                    "+experiment=no_lm_best"]
    assert err.getvalue().splitlines() == [
        "deprecated: experiment=offline_best is now experiment=no_lm_best; the old name goes in the next release",
        "deprecated: stages=offline is now stages=no_lm; the old name goes in the next release"]


@pytest.mark.parametrize(("arg", "expected"), [
    ("experiment=choice(offline_best,compile_heads)", "experiment=choice(no_lm_best,compile_heads)"),
    ("experiment=[offline_best]", "experiment=[no_lm_best]"),
    ("program/archehr/fallback=offline", "program/archehr/fallback=no_lm"),
    ("+program.cascade.x=1", "+program.module.x=1"),
    ("~program.cascade", "~program.module"),
    ("program.cascade=null", "program.module=null"),
])
def test_old_names_in_sweeps_and_with_prefixes_are_rewritten(arg, expected):
    assert rewrite([arg])[0] == [expected]


@pytest.mark.parametrize("arg", [
    "metrics=offline",              # 'offline' still means 'no network' there: not renamed
    "experiment=offline_best2", "experiment=x/offline_best", "program.cascades.x=1", "program.cascade_x=1",
    "hydra.run.dir=outputs/offline_best", "query=offline_best", "--cfg", "job", "-m",
])
def test_other_names_pass_unchanged(arg):
    assert rewrite([arg]) == ([arg], [])


def test_the_docs_list_every_alias():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [a.before for a in ALIASES if f"`{a.before}`" not in text]
    assert not missing, f"docs/configuration.md does not name the aliases {missing}"
