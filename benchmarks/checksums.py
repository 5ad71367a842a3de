"""What the dumps' and packs' checksums cost (issue 50), against the extraction and a pack's read.

SmolLM2-135M's architecture with seeded random weights (the cost of the real model: 30 layers, 9
query and 3 KV heads of 64), one chunk of --length tokens (default 8192, its full context), every
L of --lengths extracted from it. Measured in one process, one after the other, warm page cache
(the files were just written), best of --repeats for the cheap steps:

  extract            write_batch with page CRCs and the batch's checksums.json (the default)
  extract-plain      the same without either (checksums=False)
  batch-manifest     write_checksums over the batch's layer files (inside `extract`)
  batch-verify       verify_files over them (what every reader of the batch does first)
  pack               pack_dumps at L = --length from the checksummed batch: verifies it, then
                     decodes with page CRCs on, then writes the pack's checksums.json
  pack-plain         pack_dumps from the plain batch (no manifest: nothing verified)
  pack-manifest      write_checksums over the pack's files (inside `pack`)
  pack-verify        verify_files over the pack's files (what read_pack does first)
  pack-read          reading every byte of the pack's files once (readinto a buffer): the floor
                     of any job that reads the whole pack

Usage: python benchmarks/checksums.py [--length 8192] [--layers 30] [--row-chunks 1]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from long_context import SMOLLM2  # noqa: E402

PROV = {"weights_sha256": "w", "tokens_fingerprint": "t"}


def model_of(layers: int):
    import torch
    from transformers import AutoConfig, AutoModel

    from attnlimits.extraction import register_capture

    torch.manual_seed(0)
    config = AutoConfig.for_model(**{**SMOLLM2, "num_hidden_layers": layers})
    return AutoModel.from_config(config, attn_implementation=register_capture()).eval()


def timed(fn, repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


_BUFFER = bytearray(16 << 20)


def read_every_byte(paths: list[Path]) -> int:
    buffer, total = _BUFFER, 0
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buffer):
                total += n
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--lengths", type=int, nargs="*", default=[64, 512, 2048])
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--row-chunks", type=int, default=1, help="pack q/k rows (all_rows)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write the table as JSON here too")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the plain batch's "cannot be verified" line

    import torch

    from attnlimits_workflow import integrity
    from attnlimits_workflow.dumps.pack import pack_dumps
    from attnlimits_workflow.dumps.write import write_batch

    torch.set_num_threads(2)
    model = model_of(args.layers)
    ids = np.random.default_rng(0).integers(0, SMOLLM2["vocab_size"], args.length)
    lengths = sorted({*args.lengths, args.length})
    root = Path(tempfile.mkdtemp(prefix="checksums-"))
    seconds: dict[str, float] = {}

    def extract(name: str, checksums: bool) -> Path:
        out = root / name
        if out.exists():
            shutil.rmtree(out)
        out.mkdir()
        write_batch(
            out,
            model,
            {0: ids},
            lengths,
            query_row="last",
            store_hidden=False,
            provenance=PROV,
            extra_metadata={},
            checksums=checksums,
        )
        return out

    # warm-up pass (not timed), then the two extractions interleaved, best of two each
    extract("warm", False)
    for _ in range(2):
        for name, checksums in (("extract", True), ("extract-plain", False)):
            t = timed(lambda n=name, c=checksums: extract(n, c))
            seconds[name] = min(seconds.get(name, float("inf")), t)
    batch, plain = root / "extract", root / "extract-plain"
    layer_files = sorted(p.name for p in batch.glob("layer*.parquet"))
    recorded = integrity.read_checksums(batch)
    seconds["batch-manifest"] = timed(
        lambda: integrity.write_checksums(batch, layer_files), args.repeats
    )

    def verify(folder: Path, names: list[str], record: dict) -> None:
        integrity._verified.clear()  # no cache between repeats: each is a job's first read
        integrity.verify_files(folder, names, record)

    seconds["batch-verify"] = timed(lambda: verify(batch, layer_files, recorded), args.repeats)

    def pack(source: Path, name: str) -> Path:
        out = root / name
        if out.exists():
            shutil.rmtree(out)
        integrity._verified.clear()
        pack_dumps([source], args.length, "value", out, expected=PROV, row_chunks=args.row_chunks)
        return out

    for _ in range(args.repeats):
        for name, source in (("pack", batch), ("pack-plain", plain)):
            t = timed(lambda s=source, n=name: pack(s, n))
            seconds[name] = min(seconds.get(name, float("inf")), t)
    packed = root / "pack"
    pack_files = sorted(p.name for p in packed.iterdir() if p.name != integrity.MANIFEST)
    pack_files = [n for n in pack_files if not n.startswith(".")]
    pack_record = integrity.read_checksums(packed)
    seconds["pack-manifest"] = timed(
        lambda: integrity.write_checksums(packed, pack_files), args.repeats
    )
    seconds["pack-verify"] = timed(lambda: verify(packed, pack_files, pack_record), args.repeats)
    seconds["pack-read"] = timed(
        lambda: read_every_byte([packed / n for n in pack_files]), args.repeats
    )

    batch_bytes = sum((batch / n).stat().st_size for n in layer_files)
    pack_bytes = sum((packed / n).stat().st_size for n in pack_files)
    extraction, pack_read = seconds["extract-plain"], seconds["pack-read"]
    print(
        f"SmolLM2 architecture, {args.layers} layers, one chunk of {args.length} tokens, "
        f"L in {lengths}; batch {batch_bytes / 2**20:.0f} MiB, pack at L = {args.length} "
        f"{pack_bytes / 2**20:.0f} MiB ({len(pack_files)} files)"
    )
    print(f"{'step':<16}{'seconds':>9}{'/ extraction':>14}{'/ pack read':>13}{'GB/s':>8}")
    sizes = {"batch-manifest": batch_bytes, "batch-verify": batch_bytes}
    sizes |= {"pack-manifest": pack_bytes, "pack-verify": pack_bytes, "pack-read": pack_bytes}
    for name, t in seconds.items():
        rate = f"{sizes[name] / t / 1e9:8.2f}" if name in sizes else " " * 8
        print(f"{name:<16}{t:9.3f}{t / extraction:14.3f}{t / pack_read:13.2f}{rate}")
    write_cost = seconds["extract"] - seconds["extract-plain"]
    read_cost = seconds["pack"] - seconds["pack-plain"]
    print(
        f"checksums on write: {write_cost:+.2f} s = {write_cost / extraction:+.1%} of the "
        f"extraction (batch manifest alone {seconds['batch-manifest'] / extraction:.1%}); "
        f"on the pack job: {read_cost:+.2f} s = {read_cost / seconds['pack-plain']:+.1%}; "
        f"a job's verification of the pack: {seconds['pack-verify'] / pack_read:.2f} x its read"
    )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "seconds": seconds,
                    "batch_bytes": batch_bytes,
                    "pack_bytes": pack_bytes,
                    "length": args.length,
                    "layers": args.layers,
                    "lengths": lengths,
                },
                indent=1,
            )
        )
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
