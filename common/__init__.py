"""Small helpers shared across concerns."""

from common.cpu import register_resolver as _register_resolver

_register_resolver()  # `${clinprog.threads:}` resolves in every process that reads a config (main, Ray workers)
