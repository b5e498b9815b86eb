"""Recursive character chunking (the seed: 1000 characters, 200 overlap), via langchain-text-splitters."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=8)
def _splitter(chunk_size: int, chunk_overlap: int):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def chunk_text(text: str, chunk_size: int = 1000, chunk_overlap: int = 200) -> list[str]:
    text = text.strip()
    if not text:
        return []
    return _splitter(chunk_size, chunk_overlap).split_text(text)
