"""Dump schema: round trip, enforcement, corruption and provenance checks."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from dump_samples import load_samples, write_pack
from transformers import AutoModel, GPT2Config

import attnlimits_workflow.dumps.read as read_module
from attnlimits.extraction import extract_chunk, register_capture
from attnlimits_workflow.analyses import separability, vanishing
from attnlimits_workflow.dumps.pack import pack_dumps
from attnlimits_workflow.dumps.read import open_dump, read_metadata
from attnlimits_workflow.dumps.schema import SCHEMA_SPEC
from attnlimits_workflow.dumps.write import write_batch
from attnlimits_workflow.integrity import write_checksums
from attnlimits_workflow.packs import PACK_ARRAYS, DumpError, LayerNormalizer, read_pack

pytestmark = pytest.mark.integration

PROV = {"weights_sha256": "w" * 8, "tokens_fingerprint": "t" * 8}


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=16,
        n_positions=64,
        vocab_size=100,
        bos_token_id=0,
        eos_token_id=0,
    )
    return AutoModel.from_config(config, attn_implementation=register_capture()).eval()


def write_test_batch(out, model, chunks):
    """One batch directory of the test model's dumps at L in {8, 32, 64}."""
    out.mkdir()
    write_batch(
        out,
        model,
        chunks,
        [8, 32, 64],
        query_row="last",
        store_hidden=True,
        store_attention_input=True,
        provenance=PROV,
        extra_metadata={},
    )
    return out


@pytest.fixture
def dump(tmp_path, model):
    chunks = {3: np.arange(64) % 100, 4: (np.arange(64) * 7) % 100}
    return write_test_batch(tmp_path / "batch000", model, chunks), chunks


def test_round_trip_equals_the_captures(dump, model):
    out, chunks = dump
    s = load_samples([out], 32, "value", with_logits=True, with_query_keys=True, expected=PROV)
    assert s.weights.shape == (2 * 2 * 2, 32) and s.x.shape == (8, 32, 8)
    assert s.layer.tolist() == [0, 0, 0, 0, 1, 1, 1, 1] and s.chunk.tolist() == [3, 3, 4, 4] * 2
    for i, chunk in enumerate([3, 4]):
        caps = list(extract_chunk(model, torch.tensor(chunks[chunk]), [8, 32, 64]))
        for cap in caps:
            for h in range(2):
                row = cap.layer * 4 + i * 2 + h
                np.testing.assert_array_equal(s.weights[row], cap.rows[32][2][h].numpy())
                np.testing.assert_array_equal(s.logits[row], cap.rows[32][1][h].numpy())
                np.testing.assert_array_equal(s.x[row], cap.v[h, :32].numpy())
                np.testing.assert_array_equal(s.query[row], cap.q[h, 31].numpy())
    hidden = load_samples([out], 8, "hidden", expected=PROV)
    attention_input = load_samples([out], 8, "attention_input", expected=PROV)
    assert hidden.x.shape == attention_input.x.shape == (8, 8, 16)
    for i, chunk in enumerate([3, 4]):
        caps = list(
            extract_chunk(
                model,
                torch.tensor(chunks[chunk]),
                [8],
                store_hidden=True,
                store_attention_input=True,
            )
        )
        for cap in caps:
            for h in range(2):  # each head's sample carries its layer's vectors
                row = cap.layer * 4 + i * 2 + h
                np.testing.assert_array_equal(hidden.x[row], cap.hidden[:8].numpy())
                np.testing.assert_array_equal(
                    attention_input.x[row], cap.attention_input[:8].numpy()
                )
    # GPT-2's attention reads ln_1 of the residual stream, not the residual stream itself
    assert not np.allclose(hidden.x, attention_input.x, atol=1e-3)


def test_file_uses_the_documented_encoding(dump):
    out, _ = dump
    md = pq.ParquetFile(out / "layer00.parquet").metadata
    names = [md.row_group(0).column(i).path_in_schema for i in range(md.num_columns)]
    q = md.row_group(0).column(names.index("q.list.element"))
    assert q.compression == "ZSTD" and "BYTE_STREAM_SPLIT" in q.encodings
    assert not any("DICT" in e for e in q.encodings)
    assert [c["name"] for c in SCHEMA_SPEC["columns"]] == pq.read_schema(
        out / "layer00.parquet"
    ).names


def test_truncated_dump_is_refused_and_quarantined(dump):
    out, _ = dump
    path = out / "layer01.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DumpError, match=r"layer01.parquet: \d+ bytes, checksums.json records"):
        load_samples([out], 8, "value")
    # the file is set aside and the batch (the rule's output) aged, so the next run rebuilds it
    assert not path.exists() and (out / "layer01.parquet.corrupt").exists()
    assert (out / ".snakemake_timestamp").stat().st_mtime == 0 and out.stat().st_mtime == 0
    # and every later reader of the batch names what happened
    with pytest.raises(DumpError, match="layer01.parquet.corrupt set aside as damaged"):
        load_samples([out], 8, "value")


def test_two_jobs_meeting_one_damaged_dump_both_report_it(dump, monkeypatch):
    """Parallel jobs read the same batch: the one that comes second finds the file already set
    aside by the first (CI caught a FileNotFoundError traceback here)."""
    out, _ = dump
    path = out / "layer01.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    real_open = read_module.pq.ParquetFile

    def other_job_sets_it_aside_first(p, *args, **kwargs):
        try:
            return real_open(p, *args, **kwargs)
        except pa.ArrowInvalid:
            os.replace(p, out / "layer01.parquet.corrupt")
            raise

    monkeypatch.setattr(read_module.pq, "ParquetFile", other_job_sets_it_aside_first)
    with pytest.raises(
        DumpError, match="not a readable Parquet dump.*set aside as layer01.parquet.corrupt\\."
    ):
        open_dump(path)
    assert sorted(p.name for p in out.glob("layer01*")) == ["layer01.parquet.corrupt"]
    assert (out / ".snakemake_timestamp").stat().st_mtime == 0


def test_dump_from_another_model_is_refused(dump):
    out, _ = dump
    with pytest.raises(DumpError, match="another model/corpus"):
        load_samples([out], 8, "value", expected={**PROV, "weights_sha256": "other"})


def test_wrong_schema_is_refused(dump):
    out, _ = dump
    meta = pq.read_schema(out / "layer00.parquet").metadata
    table = pa.table({"chunk": pa.array([0], pa.int32())}).replace_schema_metadata(meta)
    pq.write_table(table, out / "layer00.parquet")
    with pytest.raises(DumpError, match="do not match dump_schema.json"):
        read_metadata(out / "layer00.parquet")


def test_length_not_extracted_is_refused(dump):
    out, _ = dump
    with pytest.raises(DumpError, match="L=16 was not extracted"):
        load_samples([out], 16, "value")


def test_mixed_configs_are_refused(tmp_path, model):
    dirs = []
    for i, lengths in enumerate([[8, 64], [8, 32, 64]]):
        d = tmp_path / f"batch{i:03d}"
        d.mkdir()
        write_batch(
            d,
            model,
            {i: np.arange(64)},
            lengths,
            query_row="last",
            store_hidden=False,
            provenance=PROV,
            extra_metadata={},
        )
        dirs.append(d)
    with pytest.raises(DumpError, match="two configs are mixed"):
        load_samples(dirs, 8, "value")


def test_metadata_is_json(dump):
    out, _ = dump
    meta = read_metadata(out / "layer00.parquet")
    assert meta["causal"] is True and meta["lengths"] == [8, 32, 64]
    json.dumps(meta)


def test_norms_match_the_vectors(dump):
    out, _ = dump
    full = load_samples([out], 32, "value", with_query_keys=True, with_norms=True, expected=PROV)
    np.testing.assert_allclose(full.query_norm, np.linalg.norm(full.query, axis=1), rtol=1e-6)
    np.testing.assert_allclose(
        full.key_norm_max, np.linalg.norm(full.keys, axis=2).max(axis=1), rtol=1e-6
    )


def test_pack_round_trip(dump, tmp_path):
    from attnlimits_workflow.packs import read_pack

    out, _ = dump
    s = load_samples([out], 32, "value", with_logits=True, with_norms=True, expected=PROV)
    write_pack(s, tmp_path / "pack")
    p = read_pack(tmp_path / "pack")
    np.testing.assert_array_equal(p.x, s.x)
    np.testing.assert_array_equal(p.weights, s.weights)
    np.testing.assert_array_equal(p.key_norm_max, s.key_norm_max)
    assert p.length == 32 and p.metadata["causal"] is True


def second_batch(tmp_path, model, chunks=None):
    """batch001 of the `dump` fixture's run: chunks 5 and 6 unless told."""
    chunks = chunks or {5: (np.arange(64) * 3) % 100, 6: (np.arange(64) * 5) % 100}
    return write_test_batch(tmp_path / "batch001", model, chunks)


@pytest.mark.parametrize("embedding", ["value", "attention_input"])
def test_streamed_pack_equals_the_loaded_one(dump, tmp_path, model, embedding):
    # pack_dumps writes file by file into memory maps; the result must be byte-identical to
    # packing everything load_samples returns, including across two batch directories.

    out, _ = dump
    second = second_batch(tmp_path, model)
    s = load_samples([out, second], 32, embedding, with_logits=True, with_norms=True, expected=PROV)
    write_pack(s, tmp_path / "loaded", embedding)
    n, x_shape = pack_dumps([out, second], 32, embedding, tmp_path / "streamed", expected=PROV)
    assert n == len(s.layer) and x_shape == s.x.shape
    for name in set(PACK_ARRAYS) - {"x"}:
        a = (tmp_path / "loaded" / f"{name}.npy").read_bytes()
        assert a == (tmp_path / "streamed" / f"{name}.npy").read_bytes(), name
    # x once per distinct vector: the 2 heads of a chunk share its attention_input; in this
    # MHA model each head has its own values
    streamed = read_pack(tmp_path / "streamed")
    distinct = np.load(tmp_path / "streamed/x.npy", mmap_mode="r")
    assert len(distinct) == (n // 2 if embedding == "attention_input" else n)
    np.testing.assert_array_equal(np.asarray(streamed.x), s.x)
    loaded = read_pack(tmp_path / "loaded")
    assert np.asarray(streamed.x).tobytes() == np.asarray(loaded.x).tobytes()
    # delta, computed once per distinct vector, equals delta of every sample's own copy
    per_sample = separability.pairwise_separation(loaded, 1.0)
    assert separability.pairwise_separation(streamed, 1.0).equals(per_sample)
    assert (tmp_path / "loaded" / "metadata.json").read_text() == (
        tmp_path / "streamed" / "metadata.json"
    ).read_text()
    # the per-layer table leaves a plain-softmax model's analysis byte-identical: the same
    # table as from the pack stripped of it, as packs were before it was recorded
    older = tmp_path / "older"
    shutil.copytree(tmp_path / "streamed", older)
    meta = json.loads((older / "metadata.json").read_text())
    assert set(meta.pop("layers")) == {"0", "1"}
    del meta["checksums"]  # nor had those packs checksums
    (older / "checksums.json").unlink()
    (older / "metadata.json").write_text(json.dumps(meta, sort_keys=True))
    for table in (vanishing.last_row, lambda p: separability.pairwise_separation(p, 1.0)):
        new, old = table(read_pack(tmp_path / "streamed")), table(read_pack(older))
        assert new.equals(old) and new.write_ipc(None).getvalue() == old.write_ipc(None).getvalue()


def test_one_pack_serves_every_readings_embedding(dump, tmp_path, model):
    # analysis.readings: x of each other embedding as x_<embedding>.npy beside the run's own x,
    # each equal to the x of a pack made for that embedding alone; read_pack picks by embedding
    out, _ = dump
    second = second_batch(tmp_path, model)
    dumps = [out, second]
    pack_dumps(
        dumps,
        32,
        "value",
        tmp_path / "all",
        expected=PROV,
        extra_embeddings=["key", "hidden", "value"],
    )
    for embedding in ("value", "key", "hidden"):
        pack_dumps(dumps, 32, embedding, tmp_path / embedding, expected=PROV)
        alone = read_pack(tmp_path / embedding)
        shared = read_pack(tmp_path / "all", embedding)
        np.testing.assert_array_equal(shared.x, alone.x)
        np.testing.assert_array_equal(shared.weights, alone.weights)
    files = {p.name for p in (tmp_path / "all").glob("x*.npy")}
    own = {"x.npy", "x_key.npy", "x_hidden.npy"}  # the own embedding once
    assert files == own | {f.replace(".npy", "_index.npy") for f in own}
    assert json.loads((tmp_path / "all/metadata.json").read_text())["extra_embeddings"] == [
        "key",
        "hidden",
    ]
    assert read_pack(tmp_path / "key").x.shape[2] != read_pack(tmp_path / "hidden").x.shape[2]
    with pytest.raises(DumpError, match="not 'attention_input'"):
        read_pack(tmp_path / "all", "attention_input")


def test_pack_rows_only_for_the_analysed_chunks(dump, tmp_path, model):
    # the all-rows protocol's q/k rows: packed for the first row_chunks chunks only, each equal
    # to its capture, with row_sample pointing back at the pack's samples
    out, chunks = dump
    second = second_batch(tmp_path, model)
    every, _ = pack_dumps(
        [out, second], 32, "value", tmp_path / "every", expected=PROV, row_chunks=4
    )
    pack_dumps([out, second], 32, "value", tmp_path / "two", expected=PROV, row_chunks=2)
    pack_dumps([out, second], 32, "value", tmp_path / "none", expected=PROV)
    full, two = read_pack(tmp_path / "every"), read_pack(tmp_path / "two")
    assert read_pack(tmp_path / "none").q_rows is None
    assert full.row_sample.tolist() == list(range(every))
    kept = np.nonzero(np.isin(two.chunk, [3, 4]))[0]
    assert two.row_sample.tolist() == kept.tolist() and len(kept) == 2 * 2 * 2
    for name in PACK_ARRAYS:
        assert (tmp_path / "every" / f"{name}.npy").read_bytes() == (
            tmp_path / "two" / f"{name}.npy"
        ).read_bytes(), name
    for s in kept:
        q, k = two.rows(int(s))
        np.testing.assert_array_equal(q, full.q_rows[s])
        np.testing.assert_array_equal(k, full.k_rows[s])
    for i, chunk in enumerate([3, 4]):
        for cap in extract_chunk(model, torch.tensor(chunks[chunk]), [8, 32, 64]):
            for h in range(2):
                q, k = two.rows(cap.layer * 8 + i * 2 + h)  # 4 chunks x 2 heads per layer
                np.testing.assert_array_equal(q, cap.q[h, :32].numpy())
                np.testing.assert_array_equal(k, cap.k[h, :32].numpy())
    with pytest.raises(DumpError, match=r"chunk 5\) has no q/k rows.*chunks \[3, 4\]"):
        two.rows(int(np.nonzero(two.chunk == 5)[0][0]))


def test_a_batch_missing_a_layer_file_is_refused(dump, tmp_path, model):
    # Deleting one layer file once made that layer silently use half the chunks.
    out, _ = dump
    second = second_batch(tmp_path, model)
    (second / "layer01.parquet").unlink()
    with pytest.raises(DumpError, match=r"batch001: has layers \[0\], expected \[0, 1\].*layer01"):
        load_samples([out, second], 8, "value", expected=PROV)
    with pytest.raises(DumpError, match="missing: layer01.parquet"):
        pack_dumps([out, second], 8, "value", tmp_path / "pack", expected=PROV)


def test_a_layer_file_from_another_batch_is_refused(dump, tmp_path, model):
    out, _ = dump
    second = second_batch(tmp_path, model)
    shutil.copy(out / "layer01.parquet", second / "layer01.parquet")
    # its checksum refuses it; re-recorded (a deliberate copy), the footers still do
    write_checksums(second, ["layer00.parquet", "layer01.parquet"])
    with pytest.raises(DumpError, match="batch001/layer01.parquet: chunks \\[3, 4\\] differ"):
        pack_dumps([out, second], 8, "value", tmp_path / "pack", expected=PROV)


def test_a_chunk_in_two_batches_is_refused(dump, tmp_path, model):
    out, _ = dump
    second = second_batch(tmp_path, model, chunks={4: np.arange(64) % 100})
    with pytest.raises(DumpError, match="chunk 4 is also in"):
        pack_dumps([out, second], 8, "value", tmp_path / "pack", expected=PROV)


def test_the_batches_must_hold_every_chunk_of_the_run(dump, tmp_path):
    out, _ = dump
    with pytest.raises(DumpError, match=r"missing \[5\]"):
        pack_dumps([out], 8, "value", tmp_path / "pack", expected=PROV, expected_chunks=[3, 4, 5])
    n, _ = pack_dumps([out], 8, "value", tmp_path / "ok", expected=PROV, expected_chunks=[3, 4])
    assert n == 2 * 2 * 2  # chunks x layers x heads


def rewrite_metadata(path, **changes):
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"attnlimits"])
    meta.update(changes)
    pq.write_table(table.replace_schema_metadata({b"attnlimits": json.dumps(meta).encode()}), path)


def test_a_dump_of_an_older_schema_is_refused_with_rebuild_advice(dump):
    out, _ = dump
    rewrite_metadata(out / "layer00.parquet", schema_version=SCHEMA_SPEC["schema_version"] - 1)
    with pytest.raises(
        DumpError, match="delete results/<model>/dumps and results/<model>/samples and rerun"
    ):
        read_metadata(out / "layer00.parquet")


@pytest.fixture(scope="module")
def gqa_model():
    from transformers import LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        vocab_size=100,
    )
    return AutoModel.from_config(config, attn_implementation=register_capture()).eval()


def write_gqa(out, model, **kwargs):
    out.mkdir()
    chunks = {0: np.arange(40) % 100}
    write_batch(out, model, chunks, [16, 40], query_row="last", store_hidden=False,
                provenance=PROV, extra_metadata={}, **kwargs)  # fmt: skip
    return out


def test_gqa_dump_keeps_each_kv_head_once(tmp_path, gqa_model):
    out = write_gqa(tmp_path / "batch000", gqa_model)
    meta = read_metadata(out / "layer00.parquet")
    assert meta["n_heads"] == 4 and meta["n_kv_heads"] == 2
    assert meta["kv_head_of_query"] == [0, 0, 1, 1]
    table = pq.read_table(out / "layer00.parquet", columns=["head", "k", "v", "q"])
    assert table["k"].null_count == table["v"].null_count == 40 * 2  # heads 2, 3 carry no k, v
    assert table["q"].null_count == 0
    caps = list(extract_chunk(gqa_model, torch.tensor(np.arange(40) % 100), [16, 40]))
    s = load_samples([out], 16, "value", with_query_keys=True, expected=PROV)
    for i in range(len(s.head)):
        cap = caps[int(s.layer[i])]
        kv = meta["kv_head_of_query"][int(s.head[i])]
        np.testing.assert_array_equal(s.x[i], cap.v[kv, :16].numpy())
        np.testing.assert_array_equal(s.keys[i], cap.k[kv, :16].numpy())


@pytest.mark.parametrize("embedding", ["key", "value", "attention_input"])
def test_gqa_pack_stores_each_shared_vector_once(tmp_path, gqa_model, embedding):
    # a pack's x holds one vector per (chunk, KV head) for keys and values and one per chunk for
    # the attention input; read back per sample it equals what each query head reads
    out = write_gqa(tmp_path / "batch000", gqa_model, store_attention_input=True)
    s = load_samples([out], 16, embedding, expected=PROV)
    n, shape = pack_dumps([out], 16, "value", tmp_path / "pack", expected=PROV,
                          extra_embeddings=[embedding])  # fmt: skip
    pack = read_pack(tmp_path / "pack", embedding)
    assert n == 8 and shape == (8, 16, 8) and pack.x.shape == s.x.shape
    assert len(pack.x.rows) == (2 if embedding == "attention_input" else 4)  # 2 layers x 1 chunk
    np.testing.assert_array_equal(np.asarray(pack.x), s.x)
    for i in range(n):  # an integer, a slice, an index array and a reversed one agree
        np.testing.assert_array_equal(pack.x[i], s.x[i])
    np.testing.assert_array_equal(pack.x[2:7], s.x[2:7])
    np.testing.assert_array_equal(pack.x[np.array([5, 1, 1, 6])], s.x[[5, 1, 1, 6]])
    np.testing.assert_array_equal(pack.x[::-1], s.x[::-1])
    np.testing.assert_array_equal(pack.x[3, 2:5], s.x[3, 2:5])
    np.testing.assert_array_equal(pack.x[1:4, :, 0], s.x[1:4, :, 0])
    with pytest.raises(IndexError, match="only integers and slices after the first index"):
        pack.x[np.array([0, 1]), np.array([2, 3])]  # numpy would pair them element-wise


def test_a_shared_x_pack_equals_the_captures_across_batches(tmp_path):
    """Review 43: the GQA pack test compared with load_samples, which expands the same index;
    here each sample's x, read back from a pack of two batches (2 and 3 chunks) of a model with
    6 query heads on 2 KV heads, equals what the model's capture gives that (chunk, layer,
    head), for every embedding, and so does delta per sample."""
    from transformers import LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=48,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        vocab_size=100,
    )
    model = AutoModel.from_config(config, attn_implementation=register_capture()).eval()
    rng = np.random.default_rng(1)
    tokens = {c: rng.integers(0, 100, 40) for c in range(5)}
    dirs = []
    for b, chunks in enumerate([[0, 1], [2, 3, 4]]):
        out = tmp_path / f"batch{b:03d}"
        out.mkdir()
        write_batch(out, model, {c: tokens[c] for c in chunks}, [16, 40], query_row="last",
                    store_hidden=True, store_attention_input=True, provenance=PROV,
                    extra_metadata={})  # fmt: skip
        dirs.append(out)
    embeddings = ["value", "key", "attention_input", "hidden"]
    pack_dumps(dirs, 16, "value", tmp_path / "pack", expected=PROV, extra_embeddings=embeddings)
    caps = {
        c: list(
            extract_chunk(
                model,
                torch.tensor(tokens[c]),
                [16, 40],
                store_hidden=True,
                store_attention_input=True,
            )
        )  # fmt: skip
        for c in tokens
    }
    for embedding in embeddings:
        pack = read_pack(tmp_path / "pack", embedding)
        assert len(pack.head) == 5 * 2 * 6
        for i in range(len(pack.head)):
            cap = caps[int(pack.chunk[i])][int(pack.layer[i])]
            kv = int(pack.head[i]) // 3
            want = (
                cap.v[kv, :16]
                if embedding == "value"
                else cap.k[kv, :16]
                if embedding == "key"
                else getattr(cap, embedding)[:16]
            )
            np.testing.assert_array_equal(pack.x[i], want.numpy().astype(np.float32))
        expanded = dataclasses.replace(pack, x=np.asarray(pack.x))
        assert separability.pairwise_separation(pack, 1.0).equals(
            separability.pairwise_separation(expanded, 1.0)
        )


def test_a_pack_index_out_of_range_is_set_aside(tmp_path, gqa_model):
    out = write_gqa(tmp_path / "batch000", gqa_model)
    pack_dumps([out], 16, "value", tmp_path / "pack", expected=PROV)
    index = np.load(tmp_path / "pack/x_index.npy")
    index[3] = 4  # one past the 4 distinct vectors
    np.save(tmp_path / "pack/x_index.npy", index)
    write_checksums(tmp_path / "pack", [p.name for p in (tmp_path / "pack").glob("*.npy")]
                    + ["metadata.json"])  # fmt: skip
    with pytest.raises(DumpError, match="x_index.npy: unreadable .* shape does not match"):
        read_pack(tmp_path / "pack")


def test_vectors_can_be_left_out_and_stored_as_float16(tmp_path, gqa_model):
    out = write_gqa(tmp_path / "batch000", gqa_model, vectors=("v",), vector_dtype="float16")
    table = pq.read_table(out / "layer01.parquet")
    assert table["q"].null_count == table["k"].null_count == table.num_rows
    assert table.schema.field("v").type.value_type == pa.float16()
    full = write_gqa(tmp_path / "batch_full", gqa_model)
    half = load_samples([out], 40, "value", with_norms=True, expected=PROV)
    ref = load_samples([full], 40, "value", with_norms=True, expected=PROV)
    assert half.x.dtype == np.float32
    np.testing.assert_allclose(half.x, ref.x, rtol=1e-3, atol=1e-3)  # float16: 11-bit mantissa
    np.testing.assert_array_equal(half.weights, ref.weights)  # rows stay float32
    np.testing.assert_array_equal(half.key_norm_max, ref.key_norm_max)  # norms of float32 k
    with pytest.raises(DumpError, match="k was not stored"):
        load_samples([out], 40, "key", expected=PROV)


def test_an_embedding_the_extraction_did_not_store_is_refused(tmp_path, gqa_model):
    out = write_gqa(tmp_path / "batch000", gqa_model, store_attention_input=True)
    assert load_samples([out], 16, "attention_input", expected=PROV).x.shape == (8, 16, 32)
    with pytest.raises(DumpError, match="no hidden vectors stored; set analysis.embedding: hidden"):
        load_samples([out], 16, "hidden", expected=PROV)
    bare = write_gqa(tmp_path / "batch001", gqa_model)
    with pytest.raises(DumpError, match="no attention_input vectors stored"):
        load_samples([bare], 16, "attention_input", expected=PROV)
    table = pq.read_table(bare / "layer00.parquet", columns=["hidden", "attention_input"])
    assert table["hidden"].null_count == table["attention_input"].null_count == table.num_rows


def test_a_pack_records_each_layers_normalizer(dump, tmp_path):
    # GPT-2: absolute positions, nothing else, in every layer, and the same per sample
    out, _ = dump
    pack_dumps([out], 32, "value", tmp_path / "pack", expected=PROV)
    pack = read_pack(tmp_path / "pack")
    layers = json.loads((tmp_path / "pack/metadata.json").read_text())["layers"]
    for layer in ("0", "1"):
        assert layers[layer] == {
            "position_embedding": "absolute",
            "sink_logits": None,
            "differential_lambda": None,
            "differential_pairs": None,
            "query_temperature": None,
            "softcap": None,
            "sliding_window": None,
        }
    assert pack.per_sample("position_embedding").tolist() == ["absolute"] * 8
    assert np.isnan(pack.per_sample("sink_logit")).all()
    with pytest.raises(KeyError, match="'sinks' is not one of"):
        pack.per_sample("sinks")


def test_a_pack_from_an_older_dump_or_an_older_pack_reads_null_normalizers(dump, tmp_path):
    # dumps written before the normalizer keys: the pack's per-layer entries are null; packs
    # written before the per-layer table: every layer's values are None
    out, _ = dump
    for layer in range(2):
        path = out / f"layer{layer:02d}.parquet"
        groups = pq.ParquetFile(path).metadata.row_group(0).num_rows
        table = pq.read_table(path)
        meta = json.loads(table.schema.metadata[b"attnlimits"])
        for key in ("position_embedding", "sink_logits", "query_temperature", "checksums"):
            del meta[key]
        pq.write_table(
            table.replace_schema_metadata({b"attnlimits": json.dumps(meta).encode()}),
            path,
            row_group_size=groups,
        )
    (out / "checksums.json").unlink()  # nor had those dumps checksums
    pack_dumps([out], 32, "value", tmp_path / "pack", expected=PROV)
    pack = read_pack(tmp_path / "pack")
    entry = json.loads((tmp_path / "pack/metadata.json").read_text())["layers"]["1"]
    assert entry["position_embedding"] is None and entry["sink_logits"] is None
    assert pack.per_sample("position_embedding").tolist() == [None] * 8
    assert np.isnan(pack.per_sample("query_temperature")).all()
    meta = json.loads((tmp_path / "pack/metadata.json").read_text())
    del meta["layers"], meta["checksums"]
    (tmp_path / "pack/checksums.json").unlink()
    (tmp_path / "pack/metadata.json").write_text(json.dumps(meta))
    older = read_pack(tmp_path / "pack")
    assert older.layer_normalizer(1) == LayerNormalizer()
    assert np.isnan(older.per_sample("sink_logit")).all()


def test_null_fixed_size_lists_round_trip(tmp_path):
    """A dump's k and v hold nulls (query heads sharing a KV head): the pinned pyarrow reads them
    back; pyarrow 25 raised "Expected all lists to be of size=64" here (apache/arrow#35692)."""
    pyarrow_reads_null_fixed_lists = read_module.pyarrow_reads_null_fixed_lists
    column = pa.array([[1.0, 2.0], None, [3.0, 4.0], None], type=pa.list_(pa.float32(), 2))
    pq.write_table(pa.table({"k": column}), tmp_path / "t.parquet", row_group_size=2)
    back = pq.ParquetFile(tmp_path / "t.parquet").read_row_groups([0, 1])["k"]
    assert back.to_pylist() == column.to_pylist()
    assert pyarrow_reads_null_fixed_lists()
    assert not pyarrow_reads_null_fixed_lists("25.0.1")
    assert pyarrow_reads_null_fixed_lists("26.0.0")


def test_an_old_pyarrow_does_not_set_a_sound_dump_aside(tmp_path, monkeypatch):
    """Under pyarrow < 26 the read fails on every run: the dump is named with the fix, not set
    aside as damaged (which would rebuild it and fail again, forever)."""
    read = read_module
    path = tmp_path / "layer00.parquet"
    path.write_bytes(b"sound")

    def fails(*args):
        raise pa.ArrowInvalid("Expected all lists to be of size=64 but index 4 had size=0")

    monkeypatch.setattr(read, "_read_selected", fails)
    monkeypatch.setattr(read, "pyarrow_reads_null_fixed_lists", lambda: False)
    with pytest.raises(DumpError, match=r"cannot read its null fixed-size lists.*pyarrow>=26"):
        read._read_or_set_aside(path, None, ["k"], 8, 8, False)
    assert path.exists() and not list(tmp_path.glob("*.corrupt"))
    # the same error under a pyarrow that reads them is damage: set aside as before
    monkeypatch.setattr(read, "pyarrow_reads_null_fixed_lists", lambda: True)
    with pytest.raises(DumpError, match="set aside"):
        read._read_or_set_aside(path, None, ["k"], 8, 8, False)
    assert not path.exists()
