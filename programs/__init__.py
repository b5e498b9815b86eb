"""DSPy programs (modules built from signatures)."""
