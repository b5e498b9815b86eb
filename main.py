"""clinprog entry point: `python main.py program=archehr [lm=...] [task=run|evaluate|compile]`."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its cost map otherwise

try:  # Ctrl-C while the libraries load: one line, as anywhere else (runners/dispatch.py), not an import traceback
    import hydra
    from omegaconf import DictConfig

    from runners.dispatch import dispatch
except KeyboardInterrupt:
    print("interrupted: stopped while starting; nothing was written", file=sys.stderr)
    raise SystemExit(130) from None


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    return dispatch(cfg)


def cli() -> None:
    """`python main.py` with `sys.argv`: a command line Hydra cannot compose is one line (common/overrides.py)."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    from common.overrides import config_mistake, too_deeply_nested

    refusal = too_deeply_nested(sys.argv[1:])  # Hydra's parser would recurse past Python's limit
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        raise SystemExit(2)
    ours = "HYDRA_FULL_ERROR" not in os.environ  # Hydra raises (instead of printing its message) only with it set
    if ours:
        os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        main()
    except KeyboardInterrupt:  # outside the task (Hydra composing, its run folder): the task's own handler is inside
        print("interrupted: stopped before the task ran; nothing of it was written", file=sys.stderr)
        raise SystemExit(130) from None
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
