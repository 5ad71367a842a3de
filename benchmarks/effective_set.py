"""N*'s cost: one intervened forward pass against the plain forward, side by side in one run.

    python benchmarks/effective_set.py --model resources/models/smollm2-135m \
        --tokens results/smollm2-135m/chunks/tokens.parquet --lengths 256 512 1024 \
        [--ns 1 16 128] [--variants attention-delete random-delete] [--repeats 2] [--block 256]
        [--device cpu] [--threads 2] [--runs results/smollm2-135m]

For each L: the plain forward of one chunk's last L tokens (the model's own attention: SDPA),
then the intervened forward at each N and variant, each the best of --repeats; prints the
seconds and the ratio to the plain forward, and the peak resident memory. N* costs one
intervened forward per evaluated N and chunk, plus one plain forward per chunk (the search's
evaluations are in its jobs' logs); --runs sums the effective_set jobs' own benchmark files
(seconds, max RSS) and their evaluations, as a ratio to as many plain forwards.
"""

from __future__ import annotations

import argparse
import platform
import resource
import time
from pathlib import Path

import numpy as np


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--lengths", type=int, nargs="+", required=True)
    parser.add_argument("--ns", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--variants", nargs="+", default=["attention-delete", "random-delete"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", help="a run's results/<model> folder: its jobs' cost")
    args = parser.parse_args()

    import torch

    from attnlimits.effective_set import Intervention, intervene
    from attnlimits_workflow.effective_set import load_causal_lm, parse_variant
    from attnlimits_workflow.jobs import read_tokens

    torch.set_num_threads(args.threads)
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{args.threads} threads, device {args.device}"
    )
    model = load_causal_lm(args.model, args.device)
    table = read_tokens(args.tokens)
    chunks = np.unique(table["chunk"].to_numpy())
    tokens = table["token_id"].to_numpy().reshape(chunks.size, -1).astype(np.int64)
    print("L\tvariant\tN\tseconds\tratio_to_plain")
    for length in args.lengths:
        ids = torch.from_numpy(np.ascontiguousarray(tokens[0, -length:]))[None].to(args.device)

        def forward(ids=ids):
            with torch.inference_mode():
                model(input_ids=ids, use_cache=False, logits_to_keep=129)

        forward()  # warm-up
        plain = best_of(args.repeats, forward)
        print(f"{length}\tplain\t-\t{plain:.3f}\t1.00")
        for variant in args.variants:
            selection, mode = parse_variant(variant)
            for n in args.ns:
                if n >= length:
                    continue
                spec = Intervention(n, selection, mode, block=args.block)

                def intervened(spec=spec):
                    with intervene(spec):
                        forward()

                seconds = best_of(args.repeats, intervened)
                print(f"{length}\t{variant}\t{n}\t{seconds:.3f}\t{seconds / plain:.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"# peak resident memory {peak:.0f} MB")
    if args.runs:
        jobs_cost(Path(args.runs))


def jobs_cost(run: Path) -> None:
    """The effective_set jobs' seconds and peak memory (their benchmark files) and their
    forward passes (the tables: one plain pass per chunk and one per evaluated N and chunk)."""
    import polars as pl

    print("L\tvariant\tjob_seconds\tmax_rss_mb\tevaluated_n\tforward_passes")
    for tsv in sorted((run / "benchmarks" / "effective_set").glob("L*/*.tsv")):
        bench = pl.read_csv(tsv, separator="\t")
        table = pl.read_parquet(run / "effective_set" / tsv.parent.name / f"{tsv.stem}.parquet")
        chunks = table["chunk"].n_unique()
        evaluated = table["n"].n_unique()
        print(
            f"{tsv.parent.name[1:]}\t{tsv.stem}\t{bench['s'][0]:.1f}\t{bench['max_rss'][0]:.0f}\t"
            f"{evaluated}\t{(evaluated + 1) * chunks}"
        )


if __name__ == "__main__":
    main()
