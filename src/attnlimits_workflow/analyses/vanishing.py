"""Lemma 1 / Corollary 1 at one L: extremes of L * alpha_i against exp(+-2 Delta/T), compared in
log space from the float64 logits. Last-row protocol only (one row per sample).

Served by the generic rules (analyses.generic): ``run`` per L, ``summarise`` of every L."""

from __future__ import annotations

import numpy as np
import polars as pl

from attnlimits.bootstrap import Band, deciding_part, joint_verdict, missed_side
from attnlimits.checks import RTOL_FLOAT32, check_bound
from attnlimits.critical import linear_fit
from attnlimits.vanishing import corollary1_delta_from_norms, vanishing
from attnlimits_workflow.assemble.claims import (
    Scorecard,
    Scoring,
    interval_text,
    measure,
    partitions,
)
from attnlimits_workflow.assemble.summaries import count, per_group, spread, violation_table
from attnlimits_workflow.packs import Pack

from .common import Job, sample_columns


def last_row(pack: Pack) -> pl.DataFrame:
    """Per sample: the scaled weight extremes, Delta/T from the norms, both bounds and checks."""
    length = pack.length
    delta = corollary1_delta_from_norms(pack.query_norm, pack.key_norm_max, pack.score_scale)
    res = vanishing(pack.logits, delta_over_t=delta)
    # log(L alpha) against -+2 Delta/T: logits and norms come from separate float32 computations.
    # L max alpha <= L whatever the logits, so an upper bound exp(2 Delta/T) >= L cannot be
    # exceeded (vacuous); L min alpha <= 1, so only a uniform row meets the lower bound's
    # ceiling exp(0).
    lower = check_bound(
        res.log_min_scaled, -2.0 * delta, upper=False, rtol=RTOL_FLOAT32, bound_ceiling=0.0
    )
    upper = check_bound(
        res.log_max_scaled,
        2.0 * delta,
        upper=True,
        rtol=RTOL_FLOAT32,
        ceiling=float(np.log(length)),
    )
    return pl.DataFrame(
        {
            **sample_columns(pack, L=length),
            "max_weight": res.max_weight,
            "max_scaled": res.max_scaled,
            "min_scaled": res.min_scaled,
            "log_max_scaled": res.log_max_scaled,
            "log_min_scaled": res.log_min_scaled,
            "delta_over_t": delta,
            "logit_span": res.logit_span,
            "lower_bound": res.lower_bound,
            "upper_bound": res.upper_bound,
            "lower_bound_check": lower.tolist(),
            "upper_bound_check": upper.tolist(),
        },
        strict=False,
    )


def run(job: Job) -> pl.DataFrame:
    """The generic rule's entry point: the table at the job's L (no settings)."""
    return last_row(job.pack)


# Table 1's vanishing claim refits its slope on each resample's per-L medians (analyses.generic)
REPLICATED = (("L",), {"max_weight_median": ("max_weight", "median")})


# Delta/T bounds every logit's size (Cauchy-Schwarz on scale q.k), and the weights here are the
# softmax of those logits, so both bounds follow for any q and k
PROVED = (
    "Corollary 1 follows from |scale q.k| <= Delta/T (Cauchy-Schwarz) for any q and k: the weights "
    "here are the softmax of the dumped logits"
)


def summarise(vanishing: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per L spreads of the largest and scaled weights (summary/vanishing.csv), and the counts of
    Corollary 1's checks (the scorecard's rows)."""
    v = vanishing
    summary = per_group(
        v,
        ("L",),
        [
            *spread("max_weight"),
            *spread("max_scaled"),
            *spread("min_scaled"),
        ],
        ("L",),
    )
    violations = violation_table(
        [
            count(
                v,
                "lower_bound_check",
                "Corollary 1 lower bound exp(-2 Delta/T) on L min alpha (log space)",
                "every (L) sample",
                RTOL_FLOAT32,
                slack=("min_scaled", "lower_bound", False),
                vacuous_reason="L min alpha <= 1: a uniform row passes any bound <= 1",
                proved=PROVED,
                # the weights are the softmax of the dumped logits, recomputed, sink or not
                proof_needs="any",
            ),
            count(
                v,
                "upper_bound_check",
                "Corollary 1 upper bound exp(2 Delta/T) on L max alpha (log space)",
                "every (L) sample",
                RTOL_FLOAT32,
                slack=("max_scaled", "upper_bound", True),
                vacuous_reason="L max alpha <= L whatever the logits: a bound exp(2 Delta/T) >= L "
                "cannot be exceeded",
                proved=PROVED,
                # the weights are the softmax of the dumped logits, recomputed, sink or not
                proof_needs="any",
            ),
        ]
    )
    return {"summary": summary, "violations": violations}


# Table 1: the claims this analysis scores (its record in attnlimits_workflow.registry), read
# from its summary and their bootstrap replicates.
# The vanishing analysis reads each sample's last row under either protocol
# (attnlimits_workflow.analyses.vanishing): said where the run's protocol is the paper's.
LAST_ROWS_ONLY = (
    "; read on the last rows (the analysed row of each (layer, chunk, head)) whatever "
    "analysis.protocol: the vanishing analysis has no all-rows form"
)


def claims(
    card: Scorecard,
    van: pl.DataFrame,
    replicates: list[pl.DataFrame] | None = None,
    protocol: str = "last_row",
) -> None:
    """Lemma 1: the largest weight falls like 1/L: a log-log slope within the band and a fit that
    explains the points (R^2 >= min_r2: a peak that stays flat, then falls off a cliff, has a
    steep slope too; review 27), on at least min_lengths lengths (two points always lie on a
    line); no row where fewer than two lengths. Always on the last rows: under the paper's
    protocol (``protocol`` all_rows) the row says so."""
    c = card.claims["vanishing"]
    fewest = int(c.get("min_lengths", 3))
    if van.height >= fewest:

        def fit(frame: pl.DataFrame) -> tuple[float, float]:
            g = frame.sort("L")
            _, s, r2 = linear_fit(
                np.log10(g["L"].to_numpy()), np.log10(g["max_weight_median"].to_numpy())
            )
            return (s, r2)

        s, r2 = measure(fit, van, replicates, card.level)
        # the slope first: where both lie in their bands it is the number read
        parts = (s, r2)
        bands = (Band(low=c.get("min_slope", -np.inf), high=c["max_slope"]), Band(low=c["min_r2"]))
        # the value columns carry the part that decides the verdict (review 29: an R^2 below
        # its band beside a slope inside its own must not print the slope as the number read)
        k = deciding_part(parts, bands)
        claim_id, claim, paper, rule = card.texts("vanishing")
        card.add_measured(
            claim_id,
            claim,
            paper,
            f"log-log slope of median max weight {interval_text(s, '.2f')}, R^2 "
            f"{interval_text(r2, '.3f')} over {van.height} lengths"
            + (LAST_ROWS_ONLY if protocol == "all_rows" else ""),
            rule,
            joint_verdict(parts, bands),
            parts[k],
            reads=("log-log slope", "R^2 of the log-log fit")[k],
            side=missed_side(parts, bands, ("slope", "R^2")),
        )
    elif van.height >= 2:
        card.cannot_score(
            "vanishing",
            f"{van.height} lengths: any {van.height} points lie on a power law",
            f"needs {fewest} lengths",
        )


def score(card: Scorecard, summary: pl.DataFrame, replicates, scoring: Scoring) -> None:
    """Table 1's row of Lemma 1 (the registry's entry point)."""
    claims(card, summary.sort("L"), partitions(replicates), scoring.protocol)
