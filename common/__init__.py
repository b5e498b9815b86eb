"""Small helpers shared across concerns."""

# Program configs use ${shared:name} (see common/instantiate.py): register the resolver whenever clinprog is imported,
# so any compose() of conf/ resolves.
from common import instantiate as _instantiate  # noqa: E402,F401
