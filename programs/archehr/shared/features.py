"""Feature helpers both learned heads use (evidence/features.py, alignment/features.py)."""

from __future__ import annotations

import numpy as np


def neighbour_max(values: np.ndarray) -> np.ndarray:
    left = np.concatenate([[0.0], values[:-1]])
    right = np.concatenate([values[1:], [0.0]])
    return np.maximum(left, right)
