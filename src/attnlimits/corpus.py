"""Corpus text handling: Project Gutenberg boilerplate and fixed-length token chunks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# Gutenberg marks the licence-free text with lines such as
# "*** START OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***" (older files: "THIS PROJECT").
_START = re.compile(
    r"^\*\*\*\s*START OF (?:THE|THIS) PROJECT GUTENBERG EBOOK.*?\*\*\*\s*$", re.I | re.M
)
_END = re.compile(
    r"^\*\*\*\s*END OF (?:THE|THIS) PROJECT GUTENBERG EBOOK.*?\*\*\*\s*$", re.I | re.M
)


@dataclass(frozen=True)
class StrippedText:
    text: str
    had_markers: bool  # False: no START/END markers, the text was used whole


def strip_gutenberg(raw: str) -> StrippedText:
    """The text between the Project Gutenberg START and END markers (both lines excluded).

    Without both markers the text is returned whole and ``had_markers`` is False, so the
    caller can warn instead of silently analysing a licence.
    """
    start = _START.search(raw)
    end = _END.search(raw, start.end() if start else 0)
    if not (start and end):
        return StrippedText(raw.strip(), had_markers=False)
    return StrippedText(raw[start.end() : end.start()].strip(), had_markers=True)


def chunk_tokens(
    token_ids: NDArray[np.integer], chunk_length: int, n_chunks: int, first_chunk: int = 0
) -> NDArray[np.int64]:
    """Consecutive, non-overlapping chunks of exactly ``chunk_length`` tokens, shape (n_chunks, chunk_length).

    Raises if the corpus does not hold ``first_chunk + n_chunks`` full chunks, naming how many it holds.
    """
    ids = np.asarray(token_ids, dtype=np.int64)
    available = ids.size // chunk_length
    if chunk_length < 1 or n_chunks < 1:
        raise ValueError("chunk_length and n_chunks must be >= 1")
    if first_chunk + n_chunks > available:
        raise ValueError(
            f"the corpus has {ids.size} tokens = {available} full chunks of {chunk_length}; "
            f"chunks {first_chunk}..{first_chunk + n_chunks - 1} were requested "
            "(lower chunking.n_chunks or chunking.first_chunk, set chunking.n_chunks: auto to "
            "take what the text holds, or use a longer corpus)"
        )
    start = first_chunk * chunk_length
    return ids[start : start + n_chunks * chunk_length].reshape(n_chunks, chunk_length)


def chunks_that_fit(
    n_tokens: int, chunk_length: int, first_chunk: int, most: int, least: int = 1
) -> int:
    """How many chunks ``chunking.n_chunks: auto`` takes: as many full chunks of ``chunk_length``
    as ``n_tokens`` hold from ``first_chunk`` on, at most ``most``.

    Raises if that is fewer than ``least``, naming how many the corpus holds.
    """
    if chunk_length < 1 or least < 1 or most < least:
        raise ValueError("need chunk_length >= 1 and 1 <= least <= most")
    available = n_tokens // chunk_length
    fit = min(most, max(0, available - first_chunk))
    if fit < least:
        raise ValueError(
            f"the corpus has {n_tokens} tokens = {available} full chunks of {chunk_length}; "
            f"chunking.n_chunks: auto needs at least {least} from chunk {first_chunk} on (the "
            "all-rows protocol's analysis.all_rows.chunks, else 1; lower it, chunking.first_chunk "
            "or chunk_length, or use a longer corpus)"
        )
    return fit


def wrap_chunks(
    chunks: NDArray[np.integer], opening: Sequence[int], closing: Sequence[int]
) -> NDArray[np.int64]:
    """Each chunk between the tokenizer's special tokens, as a model saw one sequence in training
    (BERT: [CLS] chunk [SEP]); shape (n_chunks, len(opening) + chunk_length + len(closing))."""
    chunks = np.asarray(chunks, dtype=np.int64)
    n = chunks.shape[0]
    head = np.broadcast_to(np.asarray(opening, dtype=np.int64), (n, len(opening)))
    tail = np.broadcast_to(np.asarray(closing, dtype=np.int64), (n, len(closing)))
    return np.concatenate([head, chunks, tail], axis=1)
