"""The typed schemas of the config's numbers (common/settings.py): a value that cannot work is one `error:` line
naming the key before any task runs, and each schema's defaults are conf/config.yaml's."""

import pytest
from omegaconf import OmegaConf

from common.errors import ConfigError
from common.settings import EXECUTORS, SECTIONS, settings
from tests.cli import dispatch_run
from tests.conftest import ROOT

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("key", sorted(SECTIONS))
def test_each_schema_holds_every_key_of_its_section_with_the_yaml_default(key):
    yaml = OmegaConf.select(OmegaConf.load(ROOT / "conf" / "config.yaml"), key)
    defaults = SECTIONS[key]().model_dump()
    assert defaults == OmegaConf.to_container(yaml), f"{key}: conf/config.yaml and common/settings.py differ"


@pytest.mark.parametrize("target", sorted(EXECUTORS))
def test_each_executor_option_holds_its_schema_keys_with_the_yaml_defaults(target):
    option, schema = EXECUTORS[target]
    yaml = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "executor" / f"{option}.yaml"))
    assert yaml.pop("_target_") == target
    assert schema().model_dump() == yaml, f"conf/executor/{option}.yaml and common/settings.py differ"


@pytest.mark.parametrize(("override", "says"), [
    ("serve.max_connections=0", "serve.max_connections must be an integer >= 1, not 0"),
    ("serve.max_body_readers=abc", "serve.max_body_readers must be an integer >= 1, not 'abc'"),
    ("serve.read_timeout_s=-1", "serve.read_timeout_s must be a number of seconds > 0, not -1"),
    ("serve.keep_alive_s=0", "serve.keep_alive_s must be a number of seconds > 0, not 0"),
    ("serve.port=99999", "serve.port must be an integer from 1 to 65535, not 99999"),
])
def test_a_serve_knob_that_cannot_work_is_one_error_line_before_anything_loads(tmp_path, override, says):
    proc = dispatch_run("task=serve", override, f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == f"error: {says}"


def test_a_section_that_is_not_a_mapping_or_holds_an_unknown_key_is_refused():
    with pytest.raises(ConfigError, match=r"^serve must be a mapping of its settings, not 5$"):
        settings(OmegaConf.create({"serve": 5}), "serve")
    with pytest.raises(ConfigError, match=r"^serve.max_conections: not a setting of serve; its settings: host, keep_alive_s, "):
        settings(OmegaConf.create({"serve": {"max_conections": 5}}), "serve")


@pytest.mark.parametrize(("value", "says"), [("", "empty"), ("  \t", "blank")])
def test_an_empty_or_blank_serve_token_is_refused_at_start_in_one_line(tmp_path, monkeypatch, value, says):
    """CLINPROG_SERVE_TOKEN="" turned the token and the Host guard both off; a blank one answered 401 to everything."""
    monkeypatch.setenv("CLINPROG_SERVE_TOKEN", value)
    proc = dispatch_run("task=serve", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == (f"error: CLINPROG_SERVE_TOKEN is set but {says}: set it to a token (e.g. python -c "
                                   "'import secrets; print(secrets.token_urlsafe(32))'), or unset it (unset "
                                   "CLINPROG_SERVE_TOKEN) to serve without one on a loopback address")


def test_the_token_rule_reads_the_variable_once_for_server_and_page(monkeypatch):
    from common.settings import ServeSettings

    monkeypatch.delenv("CLINPROG_SERVE_TOKEN", raising=False)
    assert ServeSettings().token() is None and ServeSettings(token_env=None).token() is None
    monkeypatch.setenv("CLINPROG_SERVE_TOKEN", "t0k3n")
    assert ServeSettings().token() == "t0k3n"
    monkeypatch.setenv("CLINPROG_SERVE_TOKEN", " t0k3n\n")
    with pytest.raises(ConfigError, match="whitespace around the token"):
        ServeSettings().token()
