"""Gutenberg stripping and chunking."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlimits.corpus import chunk_tokens, chunks_that_fit, strip_gutenberg

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


def test_auto_chunking_takes_what_the_text_holds_up_to_the_cap():
    # 6840 tokens in chunks of 510: 13 full chunks (the new user's text of issue 49)
    assert chunks_that_fit(6840, 510, first_chunk=0, most=16) == 13
    assert chunks_that_fit(6840, 510, first_chunk=3, most=16) == 10
    assert chunks_that_fit(6840, 510, first_chunk=0, most=8) == 8
    assert chunks_that_fit(6839, 510, first_chunk=0, most=16) == 13  # 6630 = 13 x 510
    assert chunks_that_fit(6629, 510, first_chunk=0, most=16) == 12
    with pytest.raises(ValueError, match="6840 tokens = 13 full chunks of 510; .* at least 2"):
        chunks_that_fit(6840, 510, first_chunk=12, most=16, least=2)
    with pytest.raises(ValueError, match="at least 1"):
        chunks_that_fit(509, 510, first_chunk=0, most=16)


@given(
    st.integers(0, 5000),
    st.integers(1, 300),
    st.integers(0, 20),
    st.integers(1, 40),
    st.integers(1, 40),
)
def test_auto_chunking_is_the_most_chunk_tokens_accepts(n_tokens, length, first, most, least):
    # the plain reference: the largest count chunk_tokens cuts from this text, capped
    def cuts(n):
        try:
            chunk_tokens(np.zeros(n_tokens), length, n, first)
            return True
        except ValueError:
            return False

    fits = [n for n in range(1, most + 1) if cuts(n)]
    if least > most:
        with pytest.raises(ValueError):
            chunks_that_fit(n_tokens, length, first, most, least)
    elif fits and fits[-1] >= least:
        assert chunks_that_fit(n_tokens, length, first, most, least) == fits[-1]
    else:
        with pytest.raises(ValueError, match=f"{n_tokens} tokens"):
            chunks_that_fit(n_tokens, length, first, most, least)


def test_python_docs_is_the_bundled_reference_text_in_a_fixed_order():
    from pydoc_data.topics import topics

    from attnlimits_workflow.corpus_io import PYTHON_DOCS, obtain_corpus, python_docs

    data, where = python_docs()
    text = data.decode("utf-8")
    # every topic, in sorted order, each once: "assert" opens it, "yield" comes last
    assert text.startswith(topics["assert"].strip()[:200])
    assert text.rstrip().endswith(topics["yield"].strip()[-200:])
    at = 0
    for name in sorted(topics):  # each topic whole, after the one before it
        at = text.index(topics[name].strip(), at)
    assert len(text) == sum(len(t.strip()) for t in topics.values()) + 2 * (len(topics) - 1) + 1
    assert "Python" in where and python_docs() == (data, where)  # deterministic
    logged = []
    got, source = obtain_corpus(
        {"path": None, "bundled": PYTHON_DOCS, "url": "http://127.0.0.1:9/x", "encoding": "utf-8"},
        log=logged.append,
    )
    assert got == text and source == where and "no download" in logged[0]
    # corpus.path still wins over the bundled text
    assert (
        obtain_corpus({"path": __file__, "bundled": PYTHON_DOCS, "encoding": "utf-8"}, log=print)[1]
        == __file__
    )


def test_python_docs_without_pydoc_data_says_what_to_do(monkeypatch):
    import sys

    from attnlimits_workflow.corpus_io import CorpusError, python_docs

    monkeypatch.setitem(sys.modules, "pydoc_data.topics", None)
    with pytest.raises(CorpusError, match="corpus.path"):
        python_docs()


def test_the_planner_reads_the_chunks_cut_and_moves_no_damaged_file(tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from attnlimits_workflow.jobs import TOKENS_META_KEY, chunks_cut
    from attnlimits_workflow.packs import DumpError

    tokens = tmp_path / "tokens.parquet"
    meta = {"first_chunk": 2, "n_chunks": 3, "fingerprint": "f" * 16}
    table = pa.table({"chunk": [2, 3, 4]}).replace_schema_metadata(
        {TOKENS_META_KEY: json.dumps(meta)}
    )
    pq.write_table(table, tokens)
    assert chunks_cut(tokens) == 3
    tokens.write_bytes(b"not parquet")
    with pytest.raises(DumpError, match="tokens.parquet: damaged token chunks"):
        chunks_cut(tokens)
    assert tokens.read_bytes() == b"not parquet"  # a dry run leaves it where it is
