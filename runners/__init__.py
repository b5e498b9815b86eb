"""Task runners: what `main.py` dispatches to (one module per program)."""
