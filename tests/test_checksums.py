"""Checksums of dumps and packs (issue 50): every byte of a dump's layer file or a pack's file is
covered, a damaged file is refused by name in one line and set aside, a second failure after a
rebuild stops, older outputs without checksums are read with one warning, and a file changed in
place makes its readers rerun.

The offsets are found in each file's own layout (Parquet page and footer offsets, the .npy
header), never picked for being harmless; a property test flips any byte."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import FUZZ_SETTINGS
from transformers import AutoModel, GPT2Config

from attnlimits.extraction import register_capture
from attnlimits_workflow import integrity
from attnlimits_workflow.dumps.pack import pack_dumps
from attnlimits_workflow.dumps.read import open_dump
from attnlimits_workflow.dumps.write import write_batch
from attnlimits_workflow.integrity import (
    ChecksumMismatch,
    file_crc32,
    read_checksums,
    refresh_changed_folders,
    unverifiable_folders,
    verify_files,
    write_checksums,
)
from attnlimits_workflow.packs import DumpError, damage_record, read_pack

PROV = {"weights_sha256": "w" * 8, "tokens_fingerprint": "t" * 8}


# ---- the checksum itself, against zlib over the whole file ----


@pytest.mark.unit
@settings(FUZZ_SETTINGS, max_examples=60)
@given(data=st.binary(max_size=5000), block=st.integers(1, 700))
def test_file_crc32_is_zlibs_crc_of_the_bytes_whatever_the_block(tmp_path_factory, data, block):
    path = tmp_path_factory.mktemp("crc") / "f"
    path.write_bytes(data)
    saved = integrity._BLOCK
    integrity._BLOCK = block  # chained over blocks as over one buffer
    try:
        assert file_crc32(path) == f"{zlib.crc32(data):08x}"
    finally:
        integrity._BLOCK = saved


@pytest.mark.unit
def test_crc32_hand_cases(tmp_path):
    # the standard check value of CRC-32 (ISO-HDLC): "123456789" -> cbf43926
    (tmp_path / "check").write_bytes(b"123456789")
    (tmp_path / "empty").write_bytes(b"")
    assert file_crc32(tmp_path / "check") == "cbf43926"
    assert file_crc32(tmp_path / "empty") == "00000000"


@pytest.mark.unit
def test_verify_names_size_crc_unlisted_and_a_damaged_manifest(tmp_path):
    for name, data in (("a.npy", b"x" * 100), ("b.npy", b"y" * 10)):
        (tmp_path / name).write_bytes(data)
    write_checksums(tmp_path, ["a.npy", "b.npy"])
    recorded = read_checksums(tmp_path)
    verify_files(tmp_path, ["a.npy", "b.npy"], recorded)
    (tmp_path / "a.npy").write_bytes(b"x" * 99 + b"z")  # same size, one byte
    with pytest.raises(ChecksumMismatch, match=r"a.npy: CRC-32 \w+, checksums.json records"):
        verify_files(tmp_path, ["a.npy"], recorded)
    (tmp_path / "b.npy").write_bytes(b"y" * 9)
    with pytest.raises(ChecksumMismatch, match="b.npy: 9 bytes, checksums.json records 10"):
        verify_files(tmp_path, ["b.npy"], recorded)
    (tmp_path / "c.npy").write_bytes(b"")
    with pytest.raises(ChecksumMismatch, match="c.npy: not listed in checksums.json"):
        verify_files(tmp_path, ["c.npy"], recorded)
    (tmp_path / "checksums.json").write_text('{"algorithm": "md5", "files": {}}')
    with pytest.raises(ChecksumMismatch, match="checksums.json: damaged checksum manifest"):
        read_checksums(tmp_path)
    (tmp_path / "checksums.json").unlink()
    assert read_checksums(tmp_path) is None


# ---- dumps: offsets from the file's own layout ----


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=16, n_positions=64, vocab_size=100)
    model = AutoModel.from_config(config, attn_implementation=register_capture()).eval()
    batch = tmp_path_factory.mktemp("pristine") / "batch000"
    batch.mkdir()
    chunks = {0: np.arange(64) % 100, 1: (np.arange(64) * 7) % 100}
    write_batch(
        batch,
        model,
        chunks,
        [8, 64],
        query_row="last",
        store_hidden=False,
        provenance=PROV,
        extra_metadata={},
    )
    pack = batch.parent / "samples/L64"
    pack_dumps([batch], 64, "value", pack, expected=PROV, row_chunks=1)
    return batch, pack


def parquet_regions(path: Path) -> dict[str, int]:
    """Byte offsets inside each region of a Parquet file, from its footer: the leading magic, a
    page header, the middle and the last byte of a column chunk's pages, the footer's middle, its
    length field and the trailing magic."""
    size = path.stat().st_size
    md = pq.ParquetFile(path).metadata
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little")
    names = [md.schema.column(i).path for i in range(md.num_columns)]
    q = md.row_group(0).column(names.index("q.list.element"))
    weights = md.row_group(md.num_row_groups - 1).column(names.index("weights.list.element"))
    start = q.data_page_offset
    return {
        "leading magic": 1,
        "page header": start + 2,
        "data page (q)": start + q.total_compressed_size // 2,
        "last page byte (weights)": weights.data_page_offset + weights.total_compressed_size - 1,
        "12 %": int(size * 0.12),
        "footer": size - 8 - footer // 2,
        "footer length": size - 6,
        "trailing magic": size - 2,
    }


def flip(path: Path, at: int, n: int = 4) -> None:
    data = bytearray(path.read_bytes())
    for i in range(at, min(at + n, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def copy_of(pristine, tmp_path) -> tuple[Path, Path]:
    batch, pack = pristine
    shutil.copytree(batch, tmp_path / "batch000")
    shutil.copytree(pack, tmp_path / "samples/L64")
    return tmp_path / "batch000", tmp_path / "samples/L64"


def assert_refused(exc: DumpError, path: Path) -> None:
    lines = str(exc).splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "set aside as" in lines[0], lines
    assert not path.exists() and list(path.parent.glob(f"{path.name}.corrupt*"))
    assert (path.parent / ".snakemake_timestamp").stat().st_mtime == 0  # the next run rebuilds
    assert path.name in damage_record(path.parent).read_text().split()


@pytest.mark.integration
@pytest.mark.parametrize("region", range(8))
def test_a_flip_in_each_region_of_a_dump_is_refused_by_name(pristine, tmp_path, region):
    batch, _ = copy_of(pristine, tmp_path)
    layer = batch / "layer00.parquet"
    name, at = list(parquet_regions(layer).items())[region]
    flip(layer, at)
    with pytest.raises(DumpError) as err:
        pack_dumps([batch], 64, "value", tmp_path / "out", expected=PROV)
    assert_refused(err.value, layer)
    assert "checksums.json records" in str(err.value), name
    assert not (tmp_path / "out/metadata.json").exists()  # no pack written from it


@pytest.mark.integration
def test_dumps_have_no_dictionary_page_and_a_dictionary_page_is_covered(pristine, tmp_path):
    """The dumps are written without dictionary encoding (dumps/write.py), so they hold no
    dictionary page: asserted, so that the day they do, the regions above must include one. The
    same checksums cover one in a dictionary-encoded file, and so do Parquet's page CRCs."""
    batch, _ = pristine
    md = pq.ParquetFile(batch / "layer00.parquet").metadata
    for g in range(md.num_row_groups):
        for c in range(md.num_columns):
            assert not md.row_group(g).column(c).has_dictionary_page
    path = tmp_path / "dict.parquet"
    table = pa.table({"token": pa.array(np.arange(4000) % 7).cast(pa.string())})
    pq.write_table(table, path, use_dictionary=True, write_page_checksum=True, compression="none")
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert column.has_dictionary_page
    write_checksums(tmp_path, ["dict.parquet"])
    # the middle of the dictionary page: its values follow a header of a few bytes
    flip(
        path,
        column.dictionary_page_offset
        + (column.data_page_offset - column.dictionary_page_offset) // 2
        + 2,
        1,
    )
    with pytest.raises(ChecksumMismatch, match="dict.parquet: CRC-32"):
        verify_files(tmp_path, ["dict.parquet"], read_checksums(tmp_path))
    with pytest.raises(OSError, match="CRC"):
        pq.ParquetFile(path, page_checksum_verification=True).read()


@pytest.mark.integration
def test_page_checksums_are_written_and_verified_by_the_reader(pristine, tmp_path):
    """Past the batch's checksums (open_dump alone), pyarrow's page CRCs still refuse a flipped
    data page: the dumps are written with them and read with verification on."""
    batch, _ = copy_of(pristine, tmp_path)
    layer = batch / "layer00.parquet"
    flip(layer, parquet_regions(layer)["data page (q)"])
    meta, handle = open_dump(layer)
    with pytest.raises(OSError, match="CRC checksum verification failed"):
        handle.read(columns=["q"])


@pytest.mark.integration
@settings(FUZZ_SETTINGS, max_examples=40)
@given(
    at=st.floats(0, 1, exclude_max=True),
    bit=st.integers(0, 7),
    which=st.sampled_from(["layer00.parquet", "layer01.parquet"]),
)
def test_any_flipped_bit_of_a_dump_is_refused(pristine, tmp_path_factory, at, bit, which):
    batch, _ = copy_of(pristine, tmp_path_factory.mktemp("any"))
    layer = batch / which
    data = bytearray(layer.read_bytes())
    data[int(at * len(data))] ^= 1 << bit
    layer.write_bytes(bytes(data))
    with pytest.raises(DumpError) as err:
        pack_dumps([batch], 8, "value", batch.parent / "out", expected=PROV)
    assert_refused(err.value, layer)


# ---- packs ----


def npy_regions(path: Path) -> dict[str, int]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        np.lib.format.read_magic(f)
        np.lib.format.read_array_header_1_0(f)
        data_start = f.tell()
    return {
        "magic": 0,
        "header": data_start // 2,
        "first value": data_start,
        "middle": (data_start + size) // 2,
        "last byte": size - 1,
    }


@pytest.mark.integration
@pytest.mark.parametrize(
    "name", ["x.npy", "weights.npy", "q_rows.npy", "k_rows.npy", "row_sample.npy"]
)
@pytest.mark.parametrize("region", range(5))
def test_a_flip_in_each_region_of_a_pack_array_is_refused_by_name(pristine, tmp_path, name, region):
    _, pack = copy_of(pristine, tmp_path)
    target = pack / name
    flip(target, list(npy_regions(target).values())[region], 1)
    with pytest.raises(DumpError) as err:
        read_pack(pack)
    assert_refused(err.value, target)


@pytest.mark.integration
@pytest.mark.parametrize("at", [0.0, 0.5, 0.999])
def test_a_damaged_pack_metadata_or_manifest_is_refused_by_name(pristine, tmp_path, at):
    _, pack = copy_of(pristine, tmp_path)
    for name in ("metadata.json", "checksums.json"):
        target = pack / name
        flip(target, int(at * target.stat().st_size), 1)
        with pytest.raises(DumpError) as err:
            read_pack(pack)
        assert str(target) in str(err.value) and len(str(err.value).splitlines()) == 1
        shutil.rmtree(pack)
        _, pack = copy_of(pristine, tmp_path / name)


@pytest.mark.integration
def test_a_pack_or_batch_whose_manifest_went_missing_is_refused(pristine, tmp_path):
    batch, pack = copy_of(pristine, tmp_path)
    (pack / "checksums.json").unlink()
    with pytest.raises(DumpError, match="checksums.json: missing, so the pack cannot be verified"):
        read_pack(pack)
    (batch / "checksums.json").unlink()
    with pytest.raises(DumpError, match="checksums.json: missing, so the batch cannot be verified"):
        pack_dumps([batch], 8, "value", tmp_path / "out", expected=PROV)
    for folder in (batch, pack):  # both outdated: the next run rebuilds them
        assert (folder / ".snakemake_timestamp").stat().st_mtime == 0


@pytest.mark.integration
def test_the_second_failure_after_a_rebuild_stops(pristine, tmp_path):
    """A damaged file is set aside and its pack aged; the rebuilt file found damaged again
    before any reader verified it (a failing disk or writer) is not set aside again, nor its
    pack aged: the run stops at the same line until someone acts."""
    _, pack = copy_of(pristine, tmp_path)
    flip(pack / "x.npy", 200, 1)
    with pytest.raises(DumpError, match="set aside as x.npy.corrupt"):
        read_pack(pack)
    # the rebuild (Snakemake deletes the folder and the job writes it again)
    shutil.rmtree(pack)
    shutil.copytree(pristine[1], pack)
    (pack / ".snakemake_timestamp").touch()  # as Snakemake stamps a finished directory output
    flip(pack / "x.npy", 300, 1)
    for _ in range(2):
        with pytest.raises(DumpError, match="damaged again after it was rebuilt") as err:
            read_pack(pack)
        message = str(err.value)
        assert (
            len(message.splitlines()) == 1 and f"delete {pack} and {damage_record(pack)}" in message
        )
        assert (pack / "x.npy").exists() and (pack / ".snakemake_timestamp").stat().st_mtime != 0


@pytest.mark.integration
def test_older_outputs_without_checksums_are_read_with_one_warning(pristine, tmp_path, caplog):
    """Dumps and packs written before checksums (no checksums.json, nothing in their metadata
    saying they had one) are read as they are, with one warning per folder."""
    batch, _ = copy_of(pristine, tmp_path)
    (batch / "checksums.json").unlink()
    for layer in ("layer00.parquet", "layer01.parquet"):
        path = batch / layer
        table = pq.read_table(path)
        recorded = json.loads(table.schema.metadata[b"attnlimits"])
        del recorded["checksums"]
        groups = pq.ParquetFile(path).metadata.row_group(0).num_rows
        pq.write_table(
            table.replace_schema_metadata({b"attnlimits": json.dumps(recorded).encode()}),
            path,
            row_group_size=groups,
        )
    with caplog.at_level(logging.INFO, logger="attnlimits.integrity"):
        pack_dumps([batch], 8, "value", tmp_path / "older", expected=PROV)
    notes = [r for r in caplog.records if "cannot be verified" in r.getMessage()]
    assert len(notes) == 1 and str(batch) in notes[0].getMessage()  # once in the job's log
    # and once for the whole run, at its start (common.smk): the finished folders without one
    (batch / ".snakemake_timestamp").touch()
    (tmp_path / "older/.snakemake_timestamp").touch()
    assert unverifiable_folders([batch, tmp_path / "older", tmp_path / "missing"]) == [batch]


@pytest.mark.integration
def test_a_file_changed_in_place_makes_its_folder_newer_than_its_readers(pristine, tmp_path):
    batch, pack = copy_of(pristine, tmp_path)
    for folder in (batch, pack):
        (folder / ".snakemake_timestamp").touch()
        past = time.time() - 100
        for p in folder.iterdir():
            os.utime(p, (past, past))
    assert refresh_changed_folders([batch, pack]) == []
    flip(batch / "layer01.parquet", 1000, 4)  # written now: newer than the stamp
    before = (batch / ".snakemake_timestamp").stat().st_mtime
    assert refresh_changed_folders([batch, pack]) == [batch]
    assert (batch / ".snakemake_timestamp").stat().st_mtime > before
    assert refresh_changed_folders([batch, pack]) == []  # once


@pytest.mark.integration
def test_two_jobs_meeting_one_damaged_pack_both_end_on_one_line(pristine, tmp_path):
    """The pack's ~50 analysis jobs map it in parallel: the first sets the damaged file aside;
    every later one names it as set aside, without setting aside a sound file."""
    _, pack = copy_of(pristine, tmp_path)
    flip(pack / "x.npy", 500, 1)
    with pytest.raises(DumpError, match="set aside as x.npy.corrupt"):
        read_pack(pack)
    with pytest.raises(DumpError) as err:
        read_pack(pack)
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert "x.npy.corrupt set aside as damaged by a job that read it" in message
    assert (pack / "metadata.json").exists() and damage_record(pack).read_text().split() == [
        "x.npy"
    ]


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["pack", "batch"])
def test_a_file_set_aside_while_this_job_checks_it_is_one_line(
    pristine, tmp_path, monkeypatch, kind
):
    """Another job renames the file between this job's listing and its checksum: the same line
    as for a file set aside earlier, never a FileNotFoundError traceback."""
    batch, pack = copy_of(pristine, tmp_path)
    target = pack / "k_rows.npy" if kind == "pack" else batch / "layer01.parquet"
    real = integrity.file_crc32

    def other_job_first(path):
        if Path(path) == target and target.exists():
            os.replace(target, target.with_name(f"{target.name}.corrupt"))
        return real(path)

    monkeypatch.setattr(integrity, "file_crc32", other_job_first)
    with pytest.raises(DumpError) as err:
        if kind == "pack":
            read_pack(pack)
        else:
            pack_dumps([batch], 8, "value", tmp_path / "out", expected=PROV)
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert f"{target.name}.corrupt set aside as damaged by a job that read it" in message


@pytest.mark.integration
@pytest.mark.parametrize("name", ["row_sample.npy", "x.npy"])
def test_a_file_the_manifest_lists_cannot_go_missing(pristine, tmp_path, name):
    """row_sample.npy is optional in a pack without checksums; with them, a listed file that is
    gone is refused (without it, q/k rows would silently pair with the wrong samples)."""
    _, pack = copy_of(pristine, tmp_path)
    (pack / name).unlink()
    with pytest.raises(DumpError, match=f"{name}: missing, though checksums.json lists it"):
        read_pack(pack)
    assert (pack / ".snakemake_timestamp").stat().st_mtime == 0


@pytest.mark.integration
def test_a_rebuilt_file_read_sound_clears_its_damage_record(pristine, tmp_path):
    """Only a rebuilt copy damaged before any reader verified it stops the run: once read sound,
    a later damage is a first damage again (set aside, rebuilt)."""
    _, pack = copy_of(pristine, tmp_path)
    flip(pack / "weights.npy", 300, 1)
    with pytest.raises(DumpError, match="set aside as weights.npy.corrupt"):
        read_pack(pack)
    shutil.rmtree(pack)
    shutil.copytree(pristine[1], pack)
    read_pack(pack)
    assert not damage_record(pack).exists()
    flip(pack / "weights.npy", 300, 1)
    with pytest.raises(DumpError, match="set aside as weights.npy.corrupt"):
        read_pack(pack)
