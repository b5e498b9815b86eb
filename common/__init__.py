"""Small helpers shared across concerns."""

# Configs use clinprog's resolvers (${output_group:...}, see common/instantiate.py): register them whenever clinprog
# is imported, so any compose() of conf/ resolves.
from common import instantiate as _instantiate  # noqa: E402,F401
