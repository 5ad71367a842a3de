"""Gutenberg stripping and chunking."""

import numpy as np
import pytest

from attnlimits.corpus import chunk_tokens, strip_gutenberg

pytestmark = pytest.mark.unit

GUTENBERG = """The Project Gutenberg eBook of Tiny
*** START OF THE PROJECT GUTENBERG EBOOK TINY ***
Chapter 1. Once upon a time.
*** END OF THE PROJECT GUTENBERG EBOOK TINY ***
Licence text that must not be analysed.
"""


def test_strips_header_and_licence():
    got = strip_gutenberg(GUTENBERG)
    assert got.had_markers and got.text == "Chapter 1. Once upon a time."


def test_without_markers_the_text_is_kept_whole():
    got = strip_gutenberg("just text\n")
    assert not got.had_markers and got.text == "just text"


def test_chunks_are_consecutive_and_exact():
    chunks = chunk_tokens(np.arange(25), 4, 3, first_chunk=1)
    assert chunks.tolist() == [[4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]


def test_too_short_corpus_names_what_it_has():
    with pytest.raises(ValueError, match="10 tokens = 2 full chunks of 4"):
        chunk_tokens(np.arange(10), 4, 3)
