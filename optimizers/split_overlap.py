"""Train and validation examples that are the same: then the compile's "after" score rewards memorising them, not
generalising."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy


@dataclass(frozen=True)
class SplitOverlap:
    same_file: bool
    same_content: int    # validation examples whose inputs are a training example's
    same_id_only: int    # ... that share only an id with one (another release may reuse ids: said apart)
    val_size: int
    train_path: str | None
    val_path: str | None

    @property
    def message(self) -> str:
        where = (f"data.train and data.val are the same file ({self.val_path})" if self.same_file
                 else "data.train and data.val overlap")
        ids = f" (and {self.same_id_only} more share an id with one)" if self.same_id_only else ""
        return (f"warning: {where}: {self.same_content} of {self.val_size} validation examples are also training "
                f"examples{ids}, so the score after compiling measures fit, not generalisation; hold examples out, "
                "e.g. data.val=<a file of other cases>")


def content_key(example: dspy.Example) -> str:
    """The example's inputs, hashed: the same case under another id still counts."""
    inputs = sorted((k, repr(v)) for k, v in example.inputs().items())
    return hashlib.sha256(repr(inputs).encode()).hexdigest()


def example_id(example: dspy.Example, item_id: Callable[[Any], str] | None) -> str | None:
    if item_id is None:
        return None
    for value in example.inputs().values():
        try:
            found = item_id(value)
        except (AttributeError, KeyError, TypeError):
            continue
        if found is not None:  # a contract without ids (item_id left as the protocol's stub) names nothing
            return str(found)
    return None


def same_path(a: Any, b: Any) -> bool:
    if not a or not b:
        return False
    try:
        return Path(str(a)).resolve() == Path(str(b)).resolve()
    except OSError:
        return str(a) == str(b)


def split_overlap(train: list[dspy.Example], val: list[dspy.Example], item_id: Callable[[Any], str] | None = None,
                  train_path: Any = None, val_path: Any = None) -> SplitOverlap | None:
    """None when the splits share nothing; else how many validation examples the training set also holds."""
    train_ids = {i for ex in train if (i := example_id(ex, item_id)) is not None}
    train_content = {content_key(ex) for ex in train}
    same_content = sum(1 for ex in val if content_key(ex) in train_content)
    same_id_only = sum(1 for ex in val if content_key(ex) not in train_content and example_id(ex, item_id) in train_ids)
    same_file = same_path(train_path, val_path)
    if not (same_content or same_id_only or same_file):
        return None
    return SplitOverlap(same_file, same_content, same_id_only, len(val), None if train_path is None else str(train_path),
                        None if val_path is None else str(val_path))
