"""The all-rows protocol's row-block kernels in numpy and in torch, side by side, at long L.

One head of random q, k (head_dim 64) and x (64 wide), every query row in blocks of
attnlimits_workflow.rows.ROW_BLOCK, on each device of analysis.all_rows.device given (numpy, cpu,
cuda[:i]). Per (L, device) and per kernel set, the seconds for the head's rows and the ratio to
numpy's, and the largest relative difference from numpy's values (equal to rounding, 1e-10):

  rows        attention_rows: logits and weights of every row (what every all-rows job does)
  distance    row_statistics (d~, the fixed-set bound, E's term) and the epsilon bound at N
  critical    row_critical_statistics at a batch of N (Algorithm 3's pass, closed form and
              Monte Carlo on analysis.all_rows.mc_rows rows)
  separability  row_separability at N on the sphere
  gradient    Algorithm 5's rows at T = 1: softmax, the Jacobian norm, g at two eps

Usage: python benchmarks/row_kernels.py [--lengths 1024 4096] [--devices numpy cpu cuda]
       [--causal] [--n-fraction 0.06]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attnlimits.arrays import namespace, to_numpy
from attnlimits.gradient import softmax, softmax_jacobian_norm_from_weights
from attnlimits.protocol import (
    HeadVectors,
    RowBlock,
    attention_rows,
    critical_n_list,
    row_critical_statistics,
    row_epsilon_bound,
    row_sensitivity,
    row_separability,
    row_statistics,
    sampled_rows,
    unit_directions,
    visible_lengths,
)
from attnlimits.separability import project_to_sphere
from attnlimits_workflow.rows import ROW_BLOCK

KERNELS = ("rows", "distance", "critical", "separability", "gradient")


def head(length: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((length, 64)).astype(np.float32)
    k = rng.standard_normal((length, 64)).astype(np.float32)
    x = rng.standard_normal((length, 64)).astype(np.float32)
    return q, k, x


def run(kernel: str, device: str, length: int, causal: bool, n: int, ns: list[int]) -> tuple:
    """(seconds, per-row values as numpy) of ``kernel`` over every row of one head."""
    xp = namespace(device)
    q, k, x = head(length)
    if kernel == "separability":
        x = project_to_sphere(x[None].astype(np.float64), 1.0)[0]
    sync = getattr(getattr(xp, "torch", None), "cuda", None)
    start = time.perf_counter()
    vectors = HeadVectors(x, xp)
    q64, k64 = xp.asarray(q, dtype=xp.float64), xp.asarray(k, dtype=xp.float64)
    drawn_rows = sampled_rows(length, 256)
    out = []
    for first in range(0, length, ROW_BLOCK):
        rows = np.arange(first, min(first + ROW_BLOCK, length))
        logits, alpha = attention_rows(q64, k64, 0.125, rows, causal=causal, xp=xp)
        if kernel == "rows":
            out.append(to_numpy(alpha))
            continue
        if kernel == "gradient":
            visible = to_numpy(xp.isfinite(logits).sum(axis=1))
            v = unit_directions(np.random.default_rng(first), len(rows), visible, length)
            base = softmax(logits, 1.0, xp=xp)
            jac = softmax_jacobian_norm_from_weights(base, xp=xp)
            g = row_sensitivity(logits, v, temperature=1.0, epsilons=[1e-3, 0.1], base=base, xp=xp)
            out.append(np.concatenate([to_numpy(jac), to_numpy(g).ravel()]))
            continue
        lengths = visible_lengths(rows, length, causal=causal, masked="non_selected")
        block = RowBlock.of(alpha, vectors, lengths)
        if kernel == "distance":
            got = row_statistics(block, n=n) | {"epsilon_bound": row_epsilon_bound(block, n=n)}
        elif kernel == "critical":
            drawn = np.nonzero(np.isin(rows, drawn_rows))[0]
            rng = np.random.default_rng(first)
            got = row_critical_statistics(
                block,
                ns,
                random_ranks=[block.random_ranks(rng, drawn) for _ in range(2)],
                random_rows=drawn,
            )
        else:
            got = row_separability(block, n=n, delta=0.5, radius_m=1.0)
        out.append(np.concatenate([to_numpy(v).ravel() for _, v in sorted(got.items())]))
    if sync is not None and device.startswith("cuda"):
        sync.synchronize()
    return time.perf_counter() - start, np.concatenate([o.ravel() for o in out])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--devices", nargs="+", default=["numpy", "cpu"])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--causal", action="store_true", help="causal rows (a decoder's)")
    parser.add_argument("--n-fraction", type=float, default=0.06, help="N = round(f L)")
    parser.add_argument("--batch", type=int, default=4, help="N per critical-N pass")
    args = parser.parse_args()
    print(
        f"{'L':>6} {'kernels':<13} {'device':<8} {'seconds':>9} {'x numpy':>8} {'max rel diff':>13}"
    )
    for length in args.lengths:
        n = max(1, round(args.n_fraction * length))
        ns = critical_n_list(length, [0.01, 0.02, 0.03, 0.04, 0.05, 0.06])[: args.batch]
        for kernel in args.kernels:
            reference = None
            for device in args.devices:
                run(kernel, device, 64, args.causal, 2, [1, 2])  # warm up: imports, threads
                seconds, values = run(kernel, device, length, args.causal, n, ns)
                if reference is None:
                    reference = (seconds, values)
                scale = np.maximum(np.abs(reference[1]), 1e-12)
                finite = np.isfinite(reference[1]) & np.isfinite(values)
                diff = float(
                    np.max(np.abs(values - reference[1])[finite] / scale[finite], initial=0)
                )
                print(
                    f"{length:>6} {kernel:<13} {device:<8} {seconds:>9.3f} "
                    f"{seconds / reference[0]:>8.2f} {diff:>13.1e}"
                )


if __name__ == "__main__":
    main()
