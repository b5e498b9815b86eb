"""What every retrieval backend returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from common.errors import ClinprogError


class RetrievalError(ClinprogError, RuntimeError):
    """A retrieval setup problem (unreachable server, embedder mismatch, missing index): one clear line."""


@dataclass(frozen=True)
class Passage:
    id: str
    text: str
    title: str = ""
    source: str = ""
    score: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def format(self) -> str:
        """The layout documents are embedded with, and that agents read."""
        return f"TITLE: {self.title}\nTEXT: {self.text}" if self.title else self.text
