"""Optimizer compile runs: DSPy teleprompters from config, task metrics wrapped for DSPy, saved compiled programs."""
