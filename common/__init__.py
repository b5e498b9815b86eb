"""Small helpers shared across concerns."""
