"""The normaliser study's verdicts: one measure per limit of the paper, computed on a trained
model's own attention (its normalizer job), compared with the baseline model's.

Each measure is oriented so that *larger relaxes the limit*:

- vanishing attention (Lemma 1): the median largest weight of a row at the largest L;
- distance collapse (Theorem 1, Algorithm 3): the mean over L of N_crit / L, the largest share
  of the context whose weighted distance the KS test still tells apart from random tokens;
- separability (Theorem 2): the mean N_s / N at the largest N of the grid;
- gradient (Lemma 2, Corollary 3): the median ||d weights / d logits||_2 at the largest L -- the
  paper's limit is that it vanishes as attention spreads (Fig. 4's drop at large T);
- length generalisation (SSMax's claim): held-out perplexity at the training context over
  perplexity at the longest evaluated context, each over the last positions of its windows
  (evaluation.tail_fraction; 1 = no loss of quality at 4x the training length, above 1 = better).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

LIMITS = {
    "vanishing": "Vanishing attention (Lemma 1): median max weight at L = {l_max}",
    "distance": "Distance collapse (Thm 1): mean N_crit / L",
    "separability": "Separability (Thm 2): mean N_s/N at N = {n_max}",
    "gradient": "Gradient (Lemma 2): median ||J|| at L = {l_max}",
    "length": "Length generalisation: ppl(C) / ppl({c_max}), last positions",
}


def verdict(value: float | None, baseline: float | None, ratio: float) -> str:
    """'relaxes' when value >= ratio x baseline, 'tightens' when <= baseline / ratio, else
    'no change'; 'not measured' when either is missing or not positive."""
    if value is None or baseline is None:
        return "not measured"
    if not (math.isfinite(value) and math.isfinite(baseline)) or value <= 0 or baseline <= 0:
        return "not measured"
    if value >= ratio * baseline:
        return "relaxes"
    if value <= baseline / ratio:
        return "tightens"
    return "no change"


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y on log x over the points with y > 0 (NaN if under two)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = (x > 0) & (y > 0)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def limit_measures(
    samples: pl.DataFrame,
    critical: pl.DataFrame,
    separability: pl.DataFrame,
    evaluation: dict[str, Any],
) -> dict[str, float | None]:
    """One trained model's measure of each limit (module docstring), plus what the table shows
    beside them: the max-weight slope in L and the held-out perplexities."""
    l_max = samples["L"].max()
    at_max = samples.filter(pl.col("L") == l_max)
    per_l = samples.group_by("L").agg(pl.col("max_weight").median()).sort("L")
    ratios = critical.drop_nulls("N_crit").with_columns(share=pl.col("N_crit") / pl.col("L"))
    n_max = separability["N"].max()
    contexts = sorted(evaluation["contexts"], key=lambda c: c["context"])
    return {
        "vanishing": float(at_max["max_weight"].median()),
        "vanishing_slope": loglog_slope(per_l["L"].to_numpy(), per_l["max_weight"].to_numpy()),
        "distance": float(ratios["share"].mean()) if ratios.height else None,
        "distance_lengths": ratios.height,
        "separability": float(separability.filter(pl.col("N") == n_max)["ratio"].mean()),
        "gradient": float(at_max["jacobian_norm"].median()),
        "length": contexts[0]["tail_perplexity"] / contexts[-1]["tail_perplexity"],
        "perplexity": contexts[0]["perplexity"],
        "perplexity_longest": contexts[-1]["perplexity"],
        "tail_perplexity": contexts[0]["tail_perplexity"],
        "tail_perplexity_longest": contexts[-1]["tail_perplexity"],
    }


def jacobian_bound(
    rule: dict[str, Any], temperature: float = 1.0, scale: np.ndarray | None = None
) -> float | np.ndarray | None:
    """An upper bound on ||d rule(z / temperature) / d z||_2 that holds for every row, where one is
    known (None for the Self-Adjust rules, whose Jacobian grows with |z|):

    - softmax(z / T0): 1 / (2 T0 T) -- Gershgorin, the row sums of |J| are 2 a_i (1 - a_i) / T;
    - sparsemax(z / T0): 1 / (T0 T) -- T0 T J is an orthogonal projection;
    - 1.5-entmax(z / T0): 1 / (T0 T) -- T0 T J = diag(g) - g g^T / sum(g) with g = sqrt(p) <= 1 is
      positive semi-definite and at most diag(g);
    - Scalable-Softmax softmax(s log(n) z): |s log n| / (2 T) per row, ``scale`` = s log n (one
      per row, or one number).
    """
    kind, t0 = rule["kind"], float(rule.get("temperature", 1.0))
    if kind == "softmax":
        return 1.0 / (2.0 * t0 * temperature)
    if kind in ("sparsemax", "entmax15"):
        return 1.0 / (t0 * temperature)
    if kind == "scalable_softmax":
        if scale is None:
            raise ValueError("the Scalable-Softmax bound needs the rows' scale s log(n)")
        return np.abs(np.asarray(scale, dtype=np.float64)) / (2.0 * temperature)
    return None
