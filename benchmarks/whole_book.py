"""The whole book: what the workflow costs on every chunk of the corpus, measured on subsets and
projected (issue 23).

GPT-2 small's architecture with seeded random weights (the real model's cost) on the first K
chunks of the corpus for each K of --chunks, each `snakemake --cores C all` from a clean results/
under --protocol, and per case: the wall time, each stage's summed job seconds and largest peak
RSS (Snakemake's benchmark files), the extraction's tokens/s and the dump bytes. A least-squares
line in K per stage then projects the whole book (the corpus's own chunk count under the model's
tokenizer) on this machine, and with the extraction at --gpu-tokens-per-s (the GPU table of
docs/performance.md) for a GPU.

Usage:
  python benchmarks/whole_book.py --corpus PATH/war_and_peace.txt --model-config PATH/gpt2 \\
      [--chunks 4,8,16] [--cores 2] [--protocol last_row] [--gpu-tokens-per-s 2954] \\
      [--critical-n-cache-mb 1024] [--keep]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workflow import CLEAN, snakemake  # noqa: E402  (benchmarks/workflow.py)

CHUNK = 1024
MODEL = "gpt2-random"
# Under all_rows these read every row of analysis.all_rows.chunks chunks, however many the run has:
# their cost does not grow with the corpus, so they are projected at their mean, not a fitted line.
FIXED_UNDER_ALL_ROWS = ("distance", "critical_n", "gradient", "separability")


def stage_costs(work: Path) -> dict[str, dict[str, float]]:
    """Per stage: summed job seconds, the largest peak RSS (MiB) and the job count."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"s": 0.0, "rss": 0.0, "jobs": 0})
    root = work / "results" / MODEL / "benchmarks"
    for tsv in sorted(root.rglob("*.tsv")):
        rel = tsv.relative_to(root)
        stage = rel.parts[1] if rel.parts[0] == "analysis" else rel.parts[0]
        stage = stage.removesuffix(".tsv")
        with open(tsv) as fh:
            row = list(csv.DictReader(fh, delimiter="\t"))[-1]
        out[stage]["s"] += float(row["s"])
        rss = row.get("max_rss", "NA")
        out[stage]["rss"] = max(out[stage]["rss"], float(rss) if rss not in ("", "NA", "-") else 0)
        out[stage]["jobs"] += 1
    return dict(out)


def book_chunks(work: Path, corpus: str) -> tuple[int, int]:
    """(tokens, chunks of CHUNK) of the whole corpus under the fetched model's tokenizer."""
    from attnlimits_workflow.models import CorpusTokenizer

    text = Path(corpus).read_text(encoding="utf-8")
    tokens = len(CorpusTokenizer(work / "resources" / "models" / MODEL).encode(text))
    return tokens, tokens // CHUNK


def run_case(args, work: Path, chunks: int) -> dict:
    config = work / f"config-{chunks}.yaml"
    import yaml

    config.write_text(
        yaml.safe_dump(
            {
                "corpus": {"path": str(Path(args.corpus).resolve())},
                "model": {
                    "name": MODEL,
                    "path": str(Path(args.model_config).resolve()),
                    "random_init": True,
                },
                "chunking": {"n_chunks": chunks},
                "extraction": {"threads": args.cores},
                "analysis": {
                    "protocol": args.protocol,
                    "critical_n": {"cache_mb": args.critical_n_cache_mb},
                },
            }
        )
    )
    for name in CLEAN:
        shutil.rmtree(work / name, ignore_errors=True)
    wall, _ = snakemake(work, config, "--cores", str(args.cores), "all")
    dumps = work / "results" / MODEL / "dumps"
    dump_bytes = sum(f.stat().st_size for f in dumps.rglob("*.parquet"))
    packs = work / "results" / MODEL / "samples"
    pack_bytes = sum(f.stat().st_size for f in packs.rglob("*.npy"))
    stages = stage_costs(work)
    extract = stages.get("extract_batch", stages.get("extract", {"s": float("nan")}))["s"]
    return {
        "chunks": chunks,
        "wall": wall,
        "stages": stages,
        "dump_bytes": dump_bytes,
        "pack_bytes": pack_bytes,
        "extract_tokens_per_s": chunks * CHUNK / extract,
    }


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y on x; the slope is NaN for a single x (no projection)."""
    if len(set(xs)) < 2:
        return float(np.mean(ys)), float("nan")
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--model-config", required=True)
    parser.add_argument("--chunks", default="4,8,16")
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--protocol", default="last_row", choices=["last_row", "all_rows"])
    parser.add_argument("--critical-n-cache-mb", type=int, default=1024)
    parser.add_argument(
        "--keep", action="store_true", help="keep the last case's working directory (printed)"
    )
    parser.add_argument(
        "--gpu-tokens-per-s",
        type=float,
        default=2954.0,
        help="GPU extraction rate for the projection (docs/performance.md's GPU table)",
    )
    args = parser.parse_args()
    sizes = sorted({int(c) for c in args.chunks.split(",")})
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="attnlimits-book-"))
    cases = [run_case(args, work, k) for k in sizes]
    tokens, n_book = book_chunks(work, args.corpus)
    stages = sorted(
        {s for c in cases for s in c["stages"]},
        key=lambda s: -cases[-1]["stages"].get(s, {"s": 0})["s"],
    )

    print(
        f"\nWhole book: GPT-2 small architecture (random init), {CHUNK}-token chunks, "
        f"protocol {args.protocol}, {args.cores} cores; the corpus is {tokens:,} tokens = "
        f"{n_book} chunks\n"
    )
    head = " | ".join(f"{k} chunks" for k in sizes)
    print(f"| stage (job seconds, summed) | {head} | per chunk | projected, {n_book} chunks |")
    print("|---|" + "---:|" * (len(sizes) + 2))
    projected_cpu = {}
    for stage in stages:
        ys = [c["stages"].get(stage, {"s": 0.0})["s"] for c in cases]
        cells = " | ".join(f"{y:.1f}" for y in ys)
        if args.protocol == "all_rows" and stage in FIXED_UNDER_ALL_ROWS:
            projected_cpu[stage] = float(np.mean(ys))
            print(f"| {stage} | {cells} | fixed | {projected_cpu[stage]:,.0f} |")
            continue
        intercept, slope = fit(sizes, ys)
        projected_cpu[stage] = intercept + slope * n_book
        print(f"| {stage} | {cells} | {slope:.2f} | {projected_cpu[stage]:,.0f} |")
    walls = [c["wall"] for c in cases]
    w0, w1 = fit(sizes, walls)
    print(
        f"| **wall, `snakemake all`** | {' | '.join(f'{w:.1f}' for w in walls)} | {w1:.2f} | "
        f"{w0 + w1 * n_book:,.0f} |"
    )
    print(f"\n| stage (largest peak RSS, MiB) | {head} | per chunk | projected, {n_book} chunks |")
    print("|---|" + "---:|" * (len(sizes) + 2))
    for stage in stages:
        ys = [c["stages"].get(stage, {"rss": 0.0})["rss"] for c in cases]
        intercept, slope = fit(sizes, ys)
        cells = " | ".join(f"{y:,.0f}" for y in ys)
        print(f"| {stage} | {cells} | {slope:.1f} | {intercept + slope * n_book:,.0f} |")
    print(
        "\n| case | extraction tokens/s | dump bytes per token per layer | pack bytes per token "
        "| largest peak RSS MiB (stage) |"
    )
    print("|---|---:|---:|---:|---|")
    for c in cases:
        worst = max(c["stages"].items(), key=lambda kv: kv[1]["rss"])
        per_token_layer = c["dump_bytes"] / (c["chunks"] * CHUNK) / 12
        print(
            f"| {c['chunks']} chunks | {c['extract_tokens_per_s']:,.0f} | {per_token_layer:,.0f} | "
            f"{c['pack_bytes'] / (c['chunks'] * CHUNK):,.0f} | {worst[1]['rss']:,.0f} ({worst[0]}) |"
        )
    per_chunk_bytes = fit(sizes, [c["dump_bytes"] for c in cases])[1]
    per_chunk_pack = fit(sizes, [c["pack_bytes"] for c in cases])[1]
    extraction = next((s for s in projected_cpu if s.startswith("extract")), None)
    cpu_total = sum(projected_cpu.values())
    gpu_extraction = tokens / args.gpu_tokens_per_s
    gpu_total = cpu_total - (projected_cpu[extraction] if extraction else 0) + gpu_extraction
    dominant = max(projected_cpu, key=projected_cpu.get)
    if len(sizes) < 2:
        print("\nOne chunk count: measured only; give two or more to project the book.")
    else:
        print(
            f"\nProjection for the whole book ({n_book} chunks): dumps {per_chunk_bytes * n_book / 1e9:,.1f} GB, "
            f"sample packs {per_chunk_pack * n_book / 1e9:,.1f} GB; "
            f"job time on this machine {cpu_total / 3600:,.1f} h (dominated by {dominant}: "
            f"{projected_cpu[dominant] / cpu_total:.0%}); with the extraction on the GPU at "
            f"{args.gpu_tokens_per_s:,.0f} tokens/s ({gpu_extraction / 60:,.1f} min) and the rest on "
            f"these cores, {gpu_total / 3600:,.1f} h of job time."
        )
    if args.keep:
        print(f"kept: {work} (config-{sizes[-1]}.yaml)")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
