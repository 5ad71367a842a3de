"""Lemma 2 / Corollary 3 at one temperature: finite-difference sensitivity g(T, eps) over seeded
random unit directions, the exact Jacobian norm of softmax(l/T), and the paper's bound.

Checks are vacuous where no data could fail them: ||J|| of softmax(l/T) is at most 1/(2T) for
every l (so the Gershgorin bound, 1/(2T) itself, cannot fail), and g for a unit direction is at
most min{1/(2T), sqrt 2 / eps} (mean value theorem; two probability vectors lie within sqrt 2)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from attnlimits import fused_gradient
from attnlimits.arrays import DEFAULT_DEVICE, NUMPY, namespace, to_numpy
from attnlimits.bootstrap import Band, joint_verdict
from attnlimits.checks import RTOL_FLOAT64, check_bound, head_outcomes, row_outcome_columns
from attnlimits.critical import linear_fit
from attnlimits.gradient import (
    COROLLARY3_WIDE_ROW_KEYS,
    corollary3_bound,
    finite_difference_sensitivity,
    gershgorin_bound,
    matched_spread_null,
    random_unit_directions,
    softmax,
    softmax_jacobian_norm,
    softmax_jacobian_norm_from_weights,
)
from attnlimits.protocol import row_sensitivity, unit_directions
from attnlimits_workflow.assemble.claims import (
    MAXIMUM_CAVEAT,
    Scorecard,
    Scoring,
    interval_text,
    measure,
    partitions,
)
from attnlimits_workflow.assemble.summaries import count, per_group, violation_table
from attnlimits_workflow.packs import Pack
from attnlimits_workflow.registry import temperature_name
from attnlimits_workflow.rows import RowKernel, pool_chunks, row_means_of
from attnlimits_workflow.streams import Stream, stream_rng

from .common import engine_settings, head_columns, sample_columns, sampling_columns
from .gradient_null import null_decision, null_rows_of

LOG = logging.getLogger("gradient")


@dataclass(frozen=True)
class Settings:
    """analysis.gradient.{epsilons, directions, null_rows, temperature_on}, seed,
    analysis.protocol, analysis.all_rows."""

    epsilons: Sequence[float]
    directions: int
    null_rows: int
    temperature_on: str
    seed: int
    protocol: str
    all_rows: Mapping[str, Any]


def g_ceiling(temperature: float, eps) -> float:
    """The largest g any logits and unit direction can give at (T, eps)."""
    return min(float(gershgorin_bound(temperature)), float(np.sqrt(2.0)) / float(eps))


def analyse(
    pack: Pack, temperature: float, settings: Settings, log: logging.Logger = LOG
) -> pl.DataFrame:
    """The table of the configured protocol (settings.protocol), one block of rows per eps."""
    protocol = all_rows if settings.protocol == "all_rows" else last_row
    return protocol(pack, temperature, settings, log)


def all_rows(
    pack: Pack, temperature: float, settings: Settings, log: logging.Logger = LOG
) -> pl.DataFrame:
    """Algorithm 5: every row t, one random unit direction v over its visible keys,
    l' = l + eps v, delta = ||softmax(l'/T) - softmax(l/T)|| / eps, averaged over rows per
    (layer, head); Fig. 4 then takes the maximum over heads (summarise: g_max_over_heads).
    The row engine's pass of this one kernel."""
    means = row_means_of(
        pack, {"": row_kernel(pack, temperature, settings)}, **engine_settings(settings)
    )[""]
    return table(pack, temperature, settings, pool_chunks(pack, means), log)


def null_row_stride(settings: Settings, length: int) -> int:
    """Every how many rows Corollary 3's null is drawn under the all-rows protocol (beside the
    first rows, :func:`null_rows_of`): about analysis.gradient.null_rows per head; 1 (every
    analysed row) when analysis.all_rows.rows draws the rows, already few."""
    if settings.all_rows.get("rows", "all") != "all":
        return 1
    return max(1, length // int(settings.null_rows))


def block_draws(settings: Settings, length: int):
    """(sample, rows, logits, visible keys) -> each row's unit direction, the block's rows that
    get a null (:func:`null_row_stride`) and their nulls of matched spread
    (attnlimits.gradient.matched_spread_null), seeded by sample and row, not T, and kept for the
    block last drawn: every T of a pass reads the same block before the next."""
    drawn: dict[tuple, tuple[NDArray, NDArray, NDArray]] = {}
    stride = null_row_stride(settings, length)

    def draws(sample, rows, logits, visible) -> tuple[NDArray, NDArray, NDArray]:
        width = logits.shape[1]
        key = (sample, int(rows[0]), len(rows), width)
        if key not in drawn:
            drawn.clear()
            rng = stream_rng(settings.seed, Stream.GRADIENT_DIRECTIONS, length, *key[:2])
            v = unit_directions(rng, len(rows), visible, width)
            nulls = null_rows_of(rows, length, stride)
            z = stream_rng(settings.seed, Stream.GRADIENT_NULL, length, *key[:2]).standard_normal(
                (len(nulls), width)
            )
            drawn[key] = (v, nulls, matched_spread_null(to_numpy(logits)[nulls], z))
        return drawn[key]

    return draws


def row_kernels(pack: Pack, temperatures, settings: Settings) -> dict[float, RowKernel]:
    """The kernel of each temperature, sharing each block's directions and null draws: they are
    seeded by sample and row, not T, so one draw serves every T of the pass."""
    draws = block_draws(settings, pack.length)
    return {T: row_kernel(pack, T, settings, draws) for T in temperatures}


def row_kernel(pack: Pack, temperature: float, settings: Settings, draws=None) -> RowKernel:
    """Algorithm 5's per-row statistics at T, as the row engine takes them, and the same
    statistics on each row's null of matched spread (attnlimits.gradient.matched_spread_null:
    the check's "_null" columns); ``draws`` as :func:`block_draws` gives them, drawn here if
    None."""
    T = temperature
    paper = float(corollary3_bound(T))
    gersh = float(gershgorin_bound(T))
    draws = draws or block_draws(settings, pack.length)
    # the logits, softmax, Jacobian norms and g in analysis.all_rows.device's namespace; the
    # directions are drawn in numpy whatever the device, the checks run in numpy
    device = settings.all_rows.get("device", DEFAULT_DEVICE)
    xp = namespace(device)
    epsilons = [float(e) for e in settings.epsilons]

    def statistics(logits, v):
        if xp is NUMPY:  # every statistic of a row in one visit (attnlimits.fused_gradient)
            return fused_gradient.gradient_rows(
                np.asarray(logits, dtype=np.float64), v, T, np.asarray(epsilons)
            )
        logits = xp.asarray(logits)
        base = softmax(logits, T, xp=xp)
        jac = to_numpy(softmax_jacobian_norm_from_weights(base, xp=xp)) / T
        sensitivity = to_numpy(
            row_sensitivity(logits, v, temperature=T, epsilons=epsilons, base=base, xp=xp)
        )
        return jac, sensitivity

    def checks(jac, sensitivity, visible, suffix: str) -> dict[str, NDArray]:
        out = {}
        c = check_bound(jac, paper, upper=True, rtol=RTOL_FLOAT64, ceiling=gersh)
        out |= row_outcome_columns(f"jacobian_paper{suffix}", c)
        # A near-uniform row of at most 4 visible keys violates Corollary 3 at any T whatever
        # the head learnt (a causal head's first rows): the rows with at least
        # COROLLARY3_WIDE_ROW_KEYS visible keys are counted apart.
        c = c.copy()
        c[visible < COROLLARY3_WIDE_ROW_KEYS] = None
        out |= row_outcome_columns(f"jacobian_paper_wide{suffix}", c)
        for eps, g in zip(settings.epsilons, sensitivity, strict=True):
            c = check_bound(g, paper, upper=True, rtol=RTOL_FLOAT64, ceiling=g_ceiling(T, eps))
            out |= row_outcome_columns(f"g_{eps}{suffix}", c)
        return out

    def per_row(block, logits, rows, sample):
        if settings.temperature_on == "raw_scores":
            logits = logits / float(pack.score_scale[sample])
        visible = to_numpy(xp.isfinite(logits).sum(axis=1))
        # seeded by sample and row, not T: every T sees the same directions and null rows
        v, nulls, null = draws(sample, rows, logits, visible)
        jac, sensitivity = statistics(logits, v)
        c = check_bound(jac, gersh, upper=True, rtol=RTOL_FLOAT64, ceiling=gersh)
        out = {"jacobian_norm": jac} | row_outcome_columns("jacobian_gershgorin", c)
        out |= {f"g_{eps}": g for eps, g in zip(settings.epsilons, sensitivity, strict=True)}
        out |= checks(jac, sensitivity, visible, "")
        # the null's outcomes on its rows and the model's on the same rows ("_paired"), not
        # applicable (NaN) on the block's others: the comparison reads the two on one set of rows
        if len(nulls):
            null_out = checks(*statistics(null, v[nulls]), visible[nulls], "_null")
        else:
            null_out = checks(np.empty(0), np.empty((len(epsilons), 0)), visible[nulls], "_null")
        paired = checks(jac[nulls], sensitivity[:, nulls], visible[nulls], "_paired")
        for name, column in (null_out | paired).items():
            out[name] = np.full(len(rows), np.nan)
            out[name][nulls] = column
        return out

    return RowKernel(per_row, masked="prefix", logits_only=True)


def table(
    pack: Pack, temperature: float, settings: Settings, pooled: dict, log: logging.Logger = LOG
) -> pl.DataFrame:
    """The per-head table at T (one block of rows per eps) from the kernel's pooled means."""
    T = temperature
    paper = float(corollary3_bound(T))
    gersh = float(gershgorin_bound(T))

    def head_check(name):
        return head_outcomes(pooled, name)[f"{name}_check"]

    def row_counts(name: str, column: str) -> dict[str, NDArray]:
        """The head's rows of each outcome of check ``name`` and of its null ("<column>_..._rows",
        as assemble.summaries.count reads them, and "<column>_null_violated_rows")."""
        model, null = head_outcomes(pooled, name), head_outcomes(pooled, f"{name}_null")
        paired = head_outcomes(pooled, f"{name}_paired")
        return {
            f"{column}_rows": model[f"{name}_rows"],
            **{
                f"{column}_{label}_rows": model[f"{name}_{label}_rows"]
                for label in ("violated", "not_testable", "vacuous")
            },
            # the rows with a null: the model's outcomes there, and the null's
            f"{column}_paired_violated_rows": paired[f"{name}_paired_violated_rows"],
            f"{column}_null_violated_rows": null[f"{name}_null_violated_rows"],
            f"{column}_null_rows": null[f"{name}_null_rows"],
        }

    H = len(pooled["layer"])
    frames = []
    for eps in settings.epsilons:
        g = pooled[f"g_{eps}"]
        frames.append(
            pl.DataFrame(
                {
                    **head_columns(pooled),
                    "T": np.full(H, T),
                    "eps": np.full(H, float(eps)),
                    "g_max": g,  # Algorithm 5: the mean over rows (one direction per row)
                    "g_mean": g,
                    "jacobian_norm": pooled["jacobian_norm"],
                    # analysis.all_rows.rows: the row-sampling errors of the per-head means
                    **sampling_errors(pooled, eps),
                    "paper_bound": np.full(H, paper),
                    "gershgorin_bound": np.full(H, gersh),
                    "rows": pooled["jacobian_norm_rows"],
                    "jacobian_paper_check": head_check("jacobian_paper"),
                    "jacobian_paper_wide_check": head_check("jacobian_paper_wide"),
                    "g_paper_check": head_check(f"g_{eps}"),
                    "jacobian_gershgorin_check": head_check("jacobian_gershgorin"),
                    **row_counts("jacobian_paper", "jacobian_paper"),
                    **row_counts("jacobian_paper_wide", "jacobian_paper_wide"),
                    **row_counts(f"g_{eps}", "g_paper"),
                },
                strict=False,
            )
        )
    log.info(
        "T=%g (all rows): max over heads of mean ||J|| %.4g", T, np.nanmax(pooled["jacobian_norm"])
    )
    return pl.concat(frames)


def engine_kernels(pack: Pack, settings: Settings, temperatures: list, inputs: Any) -> dict:
    """The row engine's kernels at L (attnlimits_workflow.engine): one per T, sharing each
    block's directions."""
    kernels = row_kernels(pack, temperatures, settings)
    return {f"T{temperature_name(t)}": kernels[t] for t in temperatures}


def engine_tables(pack, settings, temperatures, pooled, log, timer) -> dict[str, pl.DataFrame]:
    """The row engine's tables at L: gradient_T<T> per T."""
    return {
        f"gradient_T{temperature_name(t)}": table(
            pack, t, settings, pooled[f"T{temperature_name(t)}"], log
        )
        for t in temperatures
    }


def sampling_errors(pooled: dict, eps: float) -> dict[str, NDArray]:
    """g_mean_se and jacobian_norm_se when analysis.all_rows.rows draws the rows; none else."""
    se = sampling_columns(pooled, f"g_{eps}", "jacobian_norm")
    if not se:
        return {}
    return {"g_mean_se": se[f"g_{eps}_se"], "jacobian_norm_se": se["jacobian_norm_se"]}


def last_row(
    pack: Pack, temperature: float, settings: Settings, log: logging.Logger = LOG
) -> pl.DataFrame:
    """Per sample (its analysed row) and eps: g's maximum and mean over the seeded directions,
    the exact ||J||, both bounds and their checks."""
    T = temperature
    logits = np.asarray(pack.logits, dtype=np.float64)
    if settings.temperature_on == "raw_scores":
        # T then divides q.k itself: T = 1/scale (sqrt(d_head) for GPT-2) is the model's own
        # attention.
        logits = logits / pack.score_scale[:, None]
    S, L = logits.shape
    # The same directions for every T (the seed does not involve T): curves over T compare.
    directions = random_unit_directions(
        settings.directions, L, stream_rng(settings.seed, Stream.GRADIENT_DIRECTIONS, L)
    )
    jac = softmax_jacobian_norm(logits, T)
    # each sample's row of i.i.d. Gaussian logits with its own spread, the same for every T
    null = matched_spread_null(
        logits, stream_rng(settings.seed, Stream.GRADIENT_NULL, L).standard_normal((S, L))
    )
    null_jac = softmax_jacobian_norm(null, T)
    paper = float(corollary3_bound(T))
    gersh = gershgorin_bound(T)

    def paper_check(value, ceiling) -> list:
        return check_bound(value, paper, upper=True, rtol=RTOL_FLOAT64, ceiling=ceiling).tolist()

    frames = []
    for eps in settings.epsilons:
        g = finite_difference_sensitivity(logits, temperature=T, eps=eps, directions=directions)
        null_g = finite_difference_sensitivity(null, temperature=T, eps=eps, directions=directions)
        frames.append(
            pl.DataFrame(
                {
                    **sample_columns(pack),
                    "T": np.full(S, T),
                    "eps": np.full(S, float(eps)),
                    "g_max": g.max(axis=1),
                    "g_mean": g.mean(axis=1),
                    "jacobian_norm": jac,
                    "paper_bound": np.full(S, paper),
                    "gershgorin_bound": np.full(S, float(gersh)),
                    "jacobian_paper_check": paper_check(jac, gersh),
                    "g_paper_check": paper_check(g.max(axis=1), g_ceiling(T, eps)),
                    "jacobian_paper_null_check": paper_check(null_jac, gersh),
                    "g_paper_null_check": paper_check(null_g.max(axis=1), g_ceiling(T, eps)),
                    "jacobian_gershgorin_check": check_bound(
                        jac, gersh, upper=True, rtol=RTOL_FLOAT64, ceiling=gersh
                    ).tolist(),
                },
                strict=False,
            )
        )
    log.info("T=%g: max ||J|| %.4g vs paper bound %.4g", T, jac.max(), paper)
    return pl.concat(frames)


# Its figure (paper Fig. 4), drawn by the generic rule analysis_figure (analyses.generic); its
# caption is its record's (attnlimits_workflow.registry).
def figure(summary: pl.DataFrame, run: dict):
    """Fig. 4 from summary/gradient.csv and the run description (assemble.fig4; imported here
    so the analysis jobs never load matplotlib)."""
    from attnlimits_workflow.assemble.fig4 import fig4

    return fig4(summary, run)


# Its summary, by its own rule (summarise_gradient: registry record's generic_summary False):
# summarise_inputs(**the rule's inputs) -> the rule's outputs by name, and REPLICATED_FROM, the
# input table, groups and summary columns Table 1's claims read, recomputed on each resample.
def summarise_inputs(gradient: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per (T, eps) the largest and median sensitivity and ||J||, and the counts of Corollary
    3's checks (and of the Gershgorin bound)."""
    g = gradient
    summary = per_group(
        g,
        ("T", "eps"),
        [
            pl.col("g_max").max().alias("g_max_over_heads"),
            pl.col("g_max").median().alias("g_max_median"),
            pl.col("jacobian_norm").max().alias("jacobian_norm_max"),
            pl.col("jacobian_norm").median().alias("jacobian_norm_median"),
            pl.col("paper_bound").first(),
            pl.col("gershgorin_bound").first(),
        ],
        ("eps", "T"),
    )
    once = g.filter(pl.col("eps") == g["eps"].min())  # the Jacobian does not depend on eps

    def corollary3(frame, column, bound, where, slack, **extra) -> dict:
        """A Corollary 3 check, decided against its null (:func:`null_decision`). Over every
        row too: a row of 2 keys and its null are the same row (two standardised draws are
        +-1), so the rows that violate whatever a head learnt cancel in the comparison."""
        no_verdict, note = null_decision(frame, column)
        checked = frame[column].cast(pl.String).is_in(["holds", "violated"]).any()
        if not (no_verdict or note) and checked:
            # no null to decide against (a table without one, or no row with one): a count
            # of a false theorem's violations, or of none, is no finding on its own
            no_verdict = (
                "the theorem is false (docs/paper-notes.md section 1) and no null of matched "
                "spread was drawn on these rows (analysis.gradient.null_rows), so the count is "
                "no finding about the model"
            )
        return count(
            frame, column, bound, where, slack=slack, no_verdict=no_verdict, note=note, **extra
        )

    jacobian = ("jacobian_norm", "paper_bound", True)
    wide = (
        [
            corollary3(
                once,
                "jacobian_paper_wide_check",
                f"Corollary 3 min{{1/(4T), sqrt 2}} on exact ||J||, rows with >= {COROLLARY3_WIDE_ROW_KEYS} "
                "visible keys",
                "every (T) sample",
                jacobian,
            )
        ]
        if wide_rows_differ(once)
        else []
    )
    violations = violation_table(
        wide
        + [
            corollary3(
                once,
                "jacobian_paper_check",
                "Corollary 3 min{1/(4T), sqrt 2} on exact ||J||",
                "every (T) sample",
                jacobian,
            ),
            corollary3(
                g,
                "g_paper_check",
                "Corollary 3 min{1/(4T), sqrt 2} on finite-difference g",
                "every (T, eps) sample",
                ("g_max", "paper_bound", True),
                vacuous_reason="g <= sqrt 2 / eps for any logits: at large eps the bound lies "
                "above every value g can take",
            ),
            count(
                once,
                "jacobian_gershgorin_check",
                "1/(2T) (Gershgorin, this project) on exact ||J||",
                "every (T) sample",
                slack=("jacobian_norm", "gershgorin_bound", True),
                vacuous_reason="||J|| <= 1/(2T) for every logit vector: the bound is the "
                "quantity's own ceiling (checks the code, not the model)",
            ),
        ]
    )
    return {"gradient": summary, "violations": violations}


def wide_rows_differ(once: pl.DataFrame) -> bool:
    """Whether Corollary 3's check on rows with >= COROLLARY3_WIDE_ROW_KEYS visible keys reads
    other rows than the check over every row: a causal head's first rows have fewer keys, an
    encoder's rows and an analysed last row at L >= 5 do not, and there the two checks are one
    fact, listed once (as the check over every row). At L < 5 it reads no row: not listed."""
    if "jacobian_paper_wide_check" not in once.columns:
        return False
    if {"jacobian_paper_wide_rows", "jacobian_paper_rows"} <= set(once.columns):
        if once["jacobian_paper_wide_rows"].fill_null(0).sum() == 0:
            # no row has that many keys (L < 5): the check reads nothing, so it is not listed
            return False
        return bool((once["jacobian_paper_wide_rows"] != once["jacobian_paper_rows"]).any())
    full = once["jacobian_paper_check"].cast(pl.String).fill_null("")
    return bool((once["jacobian_paper_wide_check"].cast(pl.String).fill_null("") != full).any())


REPLICATED_FROM = ("gradient", ("T", "eps"), {"g_max_over_heads": ("g_max", "max")})


# Table 1: the claims this analysis scores (its record in attnlimits_workflow.registry), read
# from its summary and their bootstrap replicates.
# analysis.all_rows.rows: the per-head means of g and ||J|| from sampled rows miss the few
# near-tie rows that carry them at small T, and so do their standard errors (docs/performance.md:
# sampled rows; at T <= 0.01 on SmolLM2's layer 0 at 8192, 63-74 % of the exact values within
# 1.96 stated errors, median relative error 0.28-0.44)
SAMPLED_GRADIENT = (
    "not testable on sampled rows (analysis.all_rows.rows): at T <= 0.01 a few near-tie rows "
    "carry a head's mean g, which the drawn rows and their standard error miss (docs/"
    "performance.md: sampled rows)"
)


# Both Corollary 3 shape claims (the 1/T slope and the drop in decades of the largest head's g)
# come out either way on logits with no structure: i.i.d. Gaussian rows gave reproduced or not by
# their spread and by the protocol (docs/paper-notes.md 24). Not compared with a null of matched
# spread, a band's verdict says nothing about the model: no verdict, the band's reading named.
NO_VERDICT = "no verdict"


def unstructured_note(band: str) -> str:
    """The measured text's note on a gradient shape claim: why no verdict, and what its band alone
    would read."""
    return (
        "no verdict: i.i.d. Gaussian logits give either verdict by their spread and the protocol, "
        f"and no null of matched spread is compared (docs/paper-notes.md 24); the band alone "
        f"reads {band}"
    )


def claims(
    card: Scorecard,
    grad: pl.DataFrame,
    replicates: list[pl.DataFrame] | None = None,
    sampled: bool = False,
) -> None:
    """Corollary 3: the sensitivity grows like 1/T at small T and drops by decades (the largest
    head's g per T, refitted on each bootstrap replicate). ``sampled``: the rows were drawn
    (analysis.all_rows.rows), and both claims, which read g at T <= 0.01, are not testable."""
    eps = grad["eps"].min()
    small_eps = grad.filter(pl.col("eps") == eps)
    c = card.claims["gradient_inverse_t"]
    claim_id, claim, paper, rule = card.texts("gradient_inverse_t")
    low = small_eps.filter(pl.col("T") < c["below_t"])
    if low.height >= 2:

        def slope(frame: pl.DataFrame) -> tuple[float]:
            g = frame.filter((pl.col("eps") == eps) & (pl.col("T") < c["below_t"])).sort("T")
            _, s, _ = linear_fit(
                np.log10(g["T"].to_numpy()), np.log10(g["g_max_over_heads"].to_numpy())
            )
            return (s,)

        (s,) = measure(slope, grad, replicates, card.level)
        band = joint_verdict((s,), (Band(c["low"], c["high"]),))
        card.add_measured(
            claim_id,
            claim,
            paper,
            f"log-log slope {interval_text(s, '.2f')} (eps = {eps:g}); {MAXIMUM_CAVEAT}"
            + (f"; {SAMPLED_GRADIENT}" if sampled else f"; {unstructured_note(band)}"),
            rule,
            "not testable" if sampled else NO_VERDICT,
            s,
            reads="log-log slope of the largest head's g",
        )
    else:
        card.cannot_score(
            "gradient_inverse_t",
            f"fewer than 2 temperatures below {c['below_t']}",
            f"needs 2 T < {c['below_t']}",
        )
    c = card.claims["gradient_drop"]
    claim_id, claim, paper, rule = card.texts("gradient_drop")

    def at_t(frame: pl.DataFrame, t: float) -> pl.DataFrame:
        return frame.filter((pl.col("eps") == eps) & ((pl.col("T") - t).abs() <= 1e-9 * t))

    if at_t(grad, c["high_t"]).height and at_t(grad, c["low_point_t"]).height:

        def decades(frame: pl.DataFrame) -> tuple[float]:
            lo_g = at_t(frame, c["low_point_t"])["g_max_over_heads"][0]
            hi_g = at_t(frame, c["high_t"])["g_max_over_heads"][0]
            return (math.log10(lo_g / hi_g),)

        (drop,) = measure(decades, grad, replicates, card.level)
        band = joint_verdict((drop,), (Band(low=c["min_decades"], high=c["max_decades"]),))
        card.add_measured(
            claim_id,
            claim,
            paper,
            f"{interval_text(drop, '.2f')} decades (largest head's g at T = {c['low_point_t']:g} vs "
            f"T = {c['high_t']:g}); {MAXIMUM_CAVEAT}"
            + (f"; {SAMPLED_GRADIENT}" if sampled else f"; {unstructured_note(band)}"),
            rule,
            "not testable" if sampled else NO_VERDICT,
            drop,
            reads="decades",
        )
    else:
        card.cannot_score(
            "gradient_drop",
            f"T grid lacks T = {c['low_point_t']:g} or T = {c['high_t']:g}",
            "needs both",
        )


def score(card: Scorecard, summary: pl.DataFrame, replicates, scoring: Scoring) -> None:
    """Table 1's rows of Corollary 3 (the registry's entry point)."""
    claims(card, summary.sort("eps", "T"), partitions(replicates), scoring.sampled)
