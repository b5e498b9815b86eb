"""OmegaConf resolvers clinprog's configs use (registered when `common` is imported, before any config resolves).

Stage implementations are `_partial_: true` nodes built with `hydra.utils.instantiate` and completed with the
shared runtime objects by `common.resources.Resources`; no resolver injects objects into configs.
"""

from __future__ import annotations

from omegaconf import OmegaConf

if not OmegaConf.has_resolver("output_group"):
    # Run folders: outputs/<program>/... for a program's tasks, outputs/<task>/... for index, search, report, ...
    OmegaConf.register_new_resolver(
        "output_group", lambda task, program, program_tasks: program if task in program_tasks else task)
