"""Typed DSPy signatures; each docstring is the instruction the LM sees."""
