"""clinprog entry point: `python main.py program=archehr [lm=...] [task=run|evaluate|compile]`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its cost map otherwise

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

import common.instantiate  # noqa: E402,F401 - registers the resolvers before configs resolve
from runners.dispatch import dispatch  # noqa: E402


# an absolute path: the same configs whether this file runs as a script or is imported (tests run it in process)
@hydra.main(version_base="1.3", config_path=str(Path(__file__).resolve().parent / "conf"), config_name="config")
def main(cfg: DictConfig) -> float | None:
    return dispatch(cfg)


def cli() -> None:
    """`python main.py` with `sys.argv`: a dead stage parameter is refused in one line before Hydra runs, and a
    command line Hydra cannot compose (a mistyped key, group or option) is one line naming the closest valid one."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    from common.overrides import config_mistake, dead_stage_key, too_deeply_nested

    # a value nested too deeply to parse, or a parameter of a stage implementation that is not in use
    refusal = too_deeply_nested(sys.argv[1:]) or dead_stage_key(sys.argv[1:])
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        raise SystemExit(2)
    ours = "HYDRA_FULL_ERROR" not in os.environ  # Hydra raises (instead of printing its message) only with it set
    if ours:
        os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        main()
    except (ConfigCompositionException, MissingConfigException, OverrideParseException) as exc:
        if not ours:  # the user asked for Hydra's full error
            raise
        print(f"error: {config_mistake(sys.argv[1:], exc)}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        if ours:
            os.environ.pop("HYDRA_FULL_ERROR", None)


if __name__ == "__main__":
    cli()
