"""Critical top-N at one L: smallest N where a KS test cannot tell d~ from the expected distance
(both the paper's closed-form term and the Monte-Carlo expectation).

Every search reaches N = L - 1, so "no pass" is a censored N_crit > L - 1 (columns censored and
top_N), not the edge of a grid. The KS test compares analysis.critical_n.samples values per side
(a seeded subset of the heads or rows, the same at every L and N; null: all), and beside the first
passing N the table gives the KS distance D at analysis.critical_n.d_fractions of L, which a reader
can compare across models whatever the test's power. A causal model's rows are searched under both
readings of its masked keys (column masked: non_selected, the paper's L x L rows, and prefix); a
bidirectional encoder's rows, and the last-row protocol's last rows, have no masked key, so the two
readings coincide and are computed once (masked = "both")."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits.bootstrap import Band, cluster_indices, resample_indices
from attnlimits.bootstrap import verdict as bootstrap_verdict
from attnlimits.critical import (
    BlockedDistances,
    censored_slope,
    first_passing_n_resampled,
    ks_critical_statistic,
    ks_min_pvalue,
    ks_subsample,
    ks_test,
    largest_share,
    slope_within,
)
from attnlimits.critical_search import cell_floor, first_passing_n
from attnlimits.protocol import critical_n_list, fixed_fraction_ns
from attnlimits_workflow.assemble.claims import Scorecard, Scoring, verdict
from attnlimits_workflow.jobs import Timer, blocks
from attnlimits_workflow.packs import Pack
from attnlimits_workflow.rows import (
    RowKernel,
    critical_n_kernel,
    critical_n_searches,
    pool_chunks,
    row_means_of,
)
from attnlimits_workflow.streams import Stream, stream_rng

from .common import Job, engine_settings, rows_to_analyse
from .critical_cells import (
    cells_text,
    direction,
    floor_outcome,
    lowest_n_crit,
    non_monotone_text,
    passes_below_a_cell,
    slope_interval,
)

LOG = logging.getLogger("critical_n")
KINDS = ("closed_form", "monte_carlo")
# N the all-rows search reads per step of its walk: every N of the list is evaluated in one pass
# over the rows first (attnlimits_workflow.rows.critical_n_kernel), so this sets only how the
# search reads the means, not its result or its cost.
CRITICAL_N_BATCH = 8
SCHEMA = {
    "N_crit": pl.Int64,
    "N_crit_low": pl.Int64,
    "top_N": pl.Int64,
    "fraction": pl.Float64,
    "ks_statistic": pl.Float64,
    "censored": pl.Boolean,
}


@dataclass(frozen=True)
class Settings:
    """analysis.critical_n.{ks_alpha, mc_draws, cache_mb, samples, d_fractions}, seed,
    analysis.protocol, analysis.all_rows, analysis.zero_weight, analysis.bootstrap."""

    ks_alpha: float
    mc_draws: int
    cache_mb: int
    samples: int | None
    d_fractions: Sequence[float]
    seed: int
    protocol: str
    all_rows: Mapping[str, Any]
    zero_weight: str
    # analysis.bootstrap (resamples, seed): the search is rerun on that many resamples of its
    # units; None: none (the table has no replicate rows)
    bootstrap: Mapping[str, Any] | None = None


def n_list(length: int, rows_settings: Mapping[str, Any]) -> list[int]:
    """The all-rows search's N list at L: analysis.all_rows.critical_n_fractions, with floor and
    ceil of each analysis.all_rows.critical_n_band_edges times L."""
    return critical_n_list(
        length, rows_settings["critical_n_fractions"], rows_settings["critical_n_band_edges"]
    )


def table_rows(length, masked, kind, tried, fixed, critical, censored, top_n, count) -> list:
    """The output rows of one (reading, expectation): every N the search tried, then the KS test
    at each fixed fraction of L (its D and p-value)."""
    common = {
        "L": length,
        "masked": masked,
        "expectation": kind,
        "N_crit": critical,
        # the least N_crit the search allows: its first pass is known only to its grid cell
        "N_crit_low": cell_floor(critical, [n for n, _ in tried]),
        "censored": censored,
        "top_N": top_n,
        "evaluations": len(tried),
        "ks_samples": count,  # values per side of the KS test
        "ks_min_pvalue": ks_min_pvalue(count, count),
    }
    return [
        {**common, "step": "search", "fraction": None, "N": n, "p_value": pv, "ks_statistic": None}
        for n, pv in tried
    ] + [
        {
            **common,
            "step": "fixed_fraction",
            "fraction": f,
            "N": n,
            "p_value": res.pvalue,
            "ks_statistic": res.statistic,
        }
        for f, (n, res) in fixed.items()
    ]


def unit_draws(layers: np.ndarray, settings: Settings) -> np.ndarray | None:
    """(resamples, units) indices of the KS test's units (``layers``: each unit's layer) drawn
    from analysis.bootstrap.seed, or None without bootstrap: with replacement one by one, or
    under analysis.bootstrap.unit "layer" whole layers (attnlimits.bootstrap.cluster_indices).
    Drawn as the summaries' draws are (assemble.replicates.unit_draws): with every head kept
    (samples: null) under all_rows, a resample here is the same heads as in the other claims'
    intervals."""
    if not settings.bootstrap:
        return None
    rng = np.random.default_rng(settings.bootstrap["seed"])
    resamples = settings.bootstrap["resamples"]
    unit = settings.bootstrap.get("unit", "head")
    if unit == "layer":
        try:
            return cluster_indices(layers, resamples, rng)
        except ValueError as error:
            raise ValueError(
                f"analysis.bootstrap.unit: layer: {error} (analysis.critical_n.samples draws a "
                "subset of the units; set it to null)"
            ) from None
    return resample_indices([len(layers)], resamples, rng)[0]


def replicate_rows(
    length, masked, kind, found: list[tuple[int | None, int | None]], grid: Sequence[int]
) -> list:
    """One row per bootstrap resample of the search (step "replicate"): its first passing N
    (null and censored when none passed), the least N_crit its cell of ``grid`` (the N the
    resampled searches walk) allows, and the top N it tried."""
    return [
        {
            "L": length,
            "masked": masked,
            "expectation": kind,
            "step": "replicate",
            "replicate": r,
            "N_crit": n_crit,
            "N_crit_low": cell_floor(n_crit, grid),
            "censored": n_crit is None,
            "top_N": top_n,
        }
        for r, (n_crit, top_n) in enumerate(found)
    ]


def with_replicates(table: pl.DataFrame, replicates: list[dict]) -> pl.DataFrame:
    """The search table and the replicate rows below it (column replicate: null on the rest)."""
    rows = pl.DataFrame(replicates, schema_overrides=SCHEMA | {"replicate": pl.Int64})
    return pl.concat(
        [table.with_columns(pl.lit(None, dtype=pl.Int64).alias("replicate")), rows],
        how="diagonal_relaxed",
    )


def analyse(pack: Pack, settings: Settings, log: logging.Logger = LOG) -> pl.DataFrame:
    """The table of the configured protocol (settings.protocol)."""
    protocol = all_rows if settings.protocol == "all_rows" else last_row
    return protocol(pack, settings, log)


def run(job: Job) -> pl.DataFrame:
    """The generic rule's entry point (analyses.generic): the table at the job's L."""
    job.log.info("L=%d: %d samples loaded in %s", job.pack.length, len(job.pack.layer), job.timer)
    return analyse(job.pack, job.settings, job.log)


def all_rows(pack: Pack, settings: Settings, log: logging.Logger = LOG) -> pl.DataFrame:
    """Algorithm 3 (attnlimits_workflow.rows.critical_n_kernel and critical_n_searches), under
    each reading of a causal row's masked keys, on a seeded subset of the heads. The row
    engine's pass of this one kernel."""
    timer = Timer()
    means = row_means_of(pack, {"": row_kernel(pack, settings)}, **engine_settings(settings))[""]
    return table(pack, settings, pool_chunks(pack, means), log, timer)


def row_kernel(pack: Pack, settings: Settings) -> RowKernel:
    """Algorithm 3's per-row statistics, every N of the list at once, as the row engine takes
    them (attnlimits_workflow.rows.critical_n_kernel)."""
    rows_settings = settings.all_rows
    return critical_n_kernel(
        pack,
        grid=n_list(pack.length, rows_settings),
        fractions=settings.d_fractions,
        seed=settings.seed,
        default_masked=rows_settings["masked"],
        mc_rows=rows_settings["mc_rows"],
        mc_draws=rows_settings["mc_draws"],
        row_count=rows_to_analyse(rows_settings),
    )


def table(
    pack: Pack, settings: Settings, pooled: dict, log: logging.Logger, timer: Timer
) -> pl.DataFrame:
    """The search table at L (searches, fixed fractions, bootstrap replicates) from the
    kernel's pooled means."""
    length, rows_settings = pack.length, settings.all_rows
    grid = n_list(length, rows_settings)
    # the (layer, head) pairs in order: the units the kernel's per-head means are indexed by
    pairs = np.unique(np.stack([pack.layer, pack.head]), axis=1)
    heads = pairs.shape[1]
    # the same heads at every L, N and reading: the stream is keyed by the head count alone
    keep = ks_subsample(
        heads, settings.samples, stream_rng(settings.seed, Stream.CRITICAL_N_SUBSAMPLE, heads)
    )
    found = critical_n_searches(
        pack,
        pooled,
        grid=grid,
        fractions=settings.d_fractions,
        alpha=settings.ks_alpha,
        keep=keep,
        default_masked=rows_settings["masked"],
        batch=CRITICAL_N_BATCH,
        log=lambda *a: log.info(*a, timer),
        draws=unit_draws(pairs[0][keep], settings),
    )
    rows, replicates = [], []
    for (reading, kind), (search, fixed, resampled) in found.items():
        replicates += replicate_rows(length, reading, kind, resampled, grid)
        log.info(
            "%s, %s: N_crit=%s%s (Algorithm 3, N list %s; p-values %s); D at %s",
            reading,
            kind,
            search.critical_n,
            " (censored)" if search.censored else "",
            grid,
            [round(pv, 4) for _, pv in search.tried],
            {f: round(r.statistic, 3) for f, (_, r) in fixed.items()},
        )
        rows += table_rows(
            length,
            reading,
            kind,
            search.tried,
            fixed,
            None if search.censored else search.critical_n,
            search.censored,
            search.top_n,
            len(keep),
        )
    log.info("%d bootstrap searches in all (%s since the job's start)", len(replicates), timer)
    return with_replicates(pl.DataFrame(rows, schema_overrides=SCHEMA), replicates)


def engine_kernels(pack: Pack, settings: Settings, values: list, inputs: Any) -> dict:
    """The row engine's kernel at L (attnlimits_workflow.engine): the whole N list."""
    return {"list": row_kernel(pack, settings)}


def engine_tables(pack, settings, values, pooled, log, timer) -> dict[str, pl.DataFrame]:
    """The row engine's table at L: critical_n."""
    return {"critical_n": table(pack, settings, pooled["list"], log, timer)}


def last_row(pack: Pack, settings: Settings, log: logging.Logger = LOG) -> pl.DataFrame:
    """Algorithm 3 on the samples' analysed rows, against each expectation, on a seeded subset
    of the samples: the first N of the all-rows protocol's N list (:func:`n_list`) whose KS test
    does not reject, each N computed only when the walk reaches it. Not a bracketing search:
    against Theorem 1.2's term the test can pass in a window and reject at both N = 1 and
    N = L - 1 (review 22), so only a walk of the list finds the first pass."""
    timer = Timer()
    L, S = pack.length, pack.weights.shape[0]
    # The products every evaluation shares, kept within analysis.critical_n.cache_mb: past it,
    # a block is prepared again at each N (same values), so memory does not grow with the corpus.
    distances = BlockedDistances.within(
        list(blocks(S, L, pack.x.shape[2])),
        lambda sl: dist.weighted(pack.weights[sl], pack.x[sl], zero_weight=settings.zero_weight),
        S,
        max_bytes=settings.cache_mb << 20,
    )
    log.info(
        "prepared %d blocks in %s; %d held within cache_mb %d, the rest recomputed at each N",
        len(distances.prepared),
        timer,
        distances.held_blocks,
        settings.cache_mb,
    )
    # the same samples at every L and N: the stream is keyed by the sample count alone
    keep = ks_subsample(
        S, settings.samples, stream_rng(settings.seed, Stream.CRITICAL_N_SUBSAMPLE, S)
    )
    expectations: dict[tuple[str, int], np.ndarray] = {}

    def expectation(kind: str, n: int) -> np.ndarray:
        if (kind, n) not in expectations:
            if kind == "closed_form":
                out = distances.closed_form(n)
            else:
                # One generator per N: a value does not depend on the order the search visits N.
                rng = stream_rng(settings.seed, Stream.CRITICAL_N_MONTE_CARLO, L, n)
                out = distances.monte_carlo(n, settings.mc_draws, rng)
            expectations[(kind, n)] = out
            log.info("  computed d~ and %s at N=%d (%s)", kind, n, timer)
        return expectations[(kind, n)]

    def ks_at(kind: str, n: int):
        return ks_test(distances.distance(n)[keep], expectation(kind, n)[keep])

    draws = unit_draws(np.asarray(pack.layer)[keep], settings)
    grid = n_list(L, settings.all_rows)
    rows, replicates = [], []
    for kind in KINDS:
        result = first_passing_n(
            (
                (n, distances.distance(n), expectation(kind, n))
                for n in grid  # lazily: the walk stops at its first pass
            ),
            alpha=settings.ks_alpha,
            keep=keep,
        )
        if draws is not None:
            # the same walk on resamples of the kept rows, every resample at once per N (each
            # N computed once, whichever resample asks for it)
            started, before = Timer(), len(expectations)
            resampled = first_passing_n_resampled(
                lambda n, k=kind: (distances.distance(n)[keep], expectation(k, n)[keep]),
                grid,
                settings.ks_alpha,
                draws,
            )
            replicates += replicate_rows(L, "both", kind, resampled, grid)
            log.info(
                "%s: %d replicate searches (grid of %d N) in %s, %d new N",
                kind,
                len(resampled),
                len(grid),
                started,
                len(expectations) - before,
            )
        fixed = {
            f: (n, ks_at(kind, n)) for f, n in fixed_fraction_ns(L, settings.d_fractions).items()
        }
        log.info(
            "%s: N_crit=%s%s (Algorithm 3, N list %s; p-values %s); D at %s",
            kind,
            result.critical_n,
            " (censored)" if result.censored else "",
            grid,
            [round(pv, 4) for _, pv in result.tried],
            {f: round(r.statistic, 3) for f, (_, r) in fixed.items()},
        )
        # the analysed row (the last of a causal model, an encoder's) has no masked key
        rows += table_rows(
            L,
            "both",
            kind,
            result.tried,
            fixed,
            None if result.censored else result.critical_n,
            result.censored,
            result.top_n,
            len(keep),
        )
    return with_replicates(pl.DataFrame(rows, schema_overrides=SCHEMA), replicates)


# Table 1: the claims this analysis scores (its record in attnlimits_workflow.registry), read
# from its summary and their bootstrap replicates.
# Algorithm 3's critical N under each reading of a causal row's masked keys.
READINGS = {
    "non_selected": "masked keys non-selected: the paper's L x L rows",
    "prefix": "masked keys left out: prefix rows",
    "both": "no masked keys: both readings coincide",
}


# What a critical-N rule reads from the curve (paper_claims.yaml, critical_n.rules.<r>.statistic):
# the slope through the origin, or the largest N_crit / L over the lengths; each known only from
# below where a length is censored. Name, function.
CRITICAL_STATISTICS = {
    "slope": ("slope", censored_slope),
    "largest_share": ("largest N_crit / L", largest_share),
}


def claims(
    card: Scorecard, crit: pl.DataFrame, alpha: float, replicates: pl.DataFrame | None = None
) -> None:
    """Algorithm 3's critical N, scored by each of the paper's two wordings (critical_n.rules)
    under each reading of a causal row's masked keys; the slope through the origin is known only
    from below where a length's search ended without a pass (attnlimits.critical.CensoredSlope).
    ``alpha``: the KS test's level (analysis.critical_n.ks_alpha); ``replicates``: the searches
    rerun on bootstrap resamples of the heads or rows (summaries.critical_n_replicates), whose
    slopes give the interval (:func:`slope_interval`)."""
    crit_readings = set(crit["masked"].unique().to_list())
    for reading in ("non_selected", "prefix"):
        source = "both" if "both" in crit_readings else reading
        # the paper's comparator first (Algorithm 3 compares with Theorem 1.2's printed term),
        # the Monte-Carlo E of the same distance beside it
        for kind, label in (("closed_form", "Thm 1.2 term"), ("monte_carlo", "Monte-Carlo E")):
            f = crit.filter((pl.col("masked") == source) & (pl.col("expectation") == kind))
            f = f.sort("L")
            reps = (
                None
                if replicates is None
                else replicates.filter(
                    (pl.col("masked") == source) & (pl.col("expectation") == kind)
                )
            )
            blind = f.filter(pl.col("ks_min_pvalue") >= alpha)
            censored = f.filter(pl.col("censored"))
            d_cols = [col for col in f.columns if col.startswith("D_at_")]
            # no rows of this expectation: no spread (the rule reads "no critical-N rows")
            spread = "; ".join(
                f"D at {col[5:-1]} L {f[col].min():.2f}-{f[col].max():.2f}"
                for col in d_cols[:2]
                if f.height
            )
            for rule_name, c in card.claims["critical_n"]["rules"].items():
                claim_id = f"critical_n:{kind}:{rule_name}" + (
                    ":prefix" if reading == "prefix" else ""
                )
                values = {**c, "expectation": label, "reading": READINGS[source]}
                claim, paper, rule = (
                    c[part].format(**values) for part in ("claim", "paper", "rule")
                )
                row = (claim_id, claim, paper)
                low, high = c.get("low", -math.inf), c.get("high", c["value"])
                if reading == "prefix" and source == "both":
                    measured = "the same rows as the L x L reading above"
                    card.add(*row, measured, rule, "not applicable")
                    continue
                if f.height == 0:
                    card.add(*row, "no critical-N rows", rule, verdict(None))
                    continue
                if blind.height:
                    # The KS test cannot reject at alpha with so few samples: every N "passes".
                    measured = (
                        f"KS over {blind['ks_samples'].min()} values per side cannot reject at "
                        f"alpha = {alpha} (smallest attainable p "
                        f"{blind['ks_min_pvalue'].max():.3g}) at {blind.height}/{f.height} lengths"
                    )
                    card.add(*row, measured, rule, "not testable")
                    continue
                # the weakest length's count: the note must not overstate the power anywhere
                k = int(f["ks_samples"].min())
                # the power the test has: below this distance it cannot reject, so with few
                # values per side an early first pass says little (review 25)
                counted = (
                    f"KS over {k} values per side (rejects only a KS distance D above about "
                    f"{ks_critical_statistic(k, k, alpha):.2f} at alpha = {alpha:g})"
                )
                name, fit = CRITICAL_STATISTICS[c.get("statistic", "slope")]
                slope = fit(
                    f["L"].to_numpy(),
                    f["N_crit"].cast(pl.Float64).to_numpy(),
                    f["censored"].to_numpy(),
                    f["top_N"].to_numpy(),
                )
                if slope.censored:
                    # a censored length's N_crit is > its top N: the slope is bounded below only
                    top, above = (
                        ("L - 1", "L")
                        if (censored["top_N"] == censored["L"] - 1).all()
                        else ("its top N tried", "that N + 1")
                    )
                    measured = (
                        f"{name} >= {slope.at_least:.3f}: {slope.censored}/{f.height} lengths "
                        f"censored (no N of the list passed up to N = {top}, counted as N_crit "
                        f">= {above})"
                    )
                    if slope.censored < f.height:
                        measured += f"; through the found lengths only {slope.found:.3f}"
                else:
                    measured = f"{name} {slope.found:.3f} ({f.height}/{f.height} lengths found)"
                # a first pass is known only to its grid cell (the N tried before it, N_crit]:
                # the statistic lies between its value at the cells' low ends and at N_crit
                lowest = lowest_n_crit(f)
                found_n = f["N_crit"].cast(pl.Float64).to_numpy()
                in_cells = (lowest < found_n) & ~np.isnan(found_n)
                floor_slope = None
                if in_cells.any():
                    floor_slope = fit(
                        f["L"].to_numpy(),
                        lowest,
                        f["censored"].to_numpy(),
                        f["top_N"].to_numpy(),
                    )
                    measured += (
                        f"; read on grid cells (N tried before the first pass, N_crit] at "
                        f"{int(in_cells.sum())}/{f.height} lengths ({cells_text(f, lowest)}): "
                        f"the {name} lies in [{floor_slope.at_least:.3f}, "
                        f"{slope.at_least:.3f}]"
                        + ("+" if slope.censored else "")
                        # only the listed N were tried: an unlisted N of an earlier gap could
                        # pass (review 36); Algorithm 3's answer on its list is the top
                        + " if each length's first pass over every integer N lies in its cell"
                    )
                interval = slope_interval(slope, reps, card.level, fit)
                if interval is not None:
                    measured += (
                        f"; {100 * card.level:g} % bootstrap interval of the {name} "
                        f"[{interval.low:.3f}, {interval.high:.3f}] over {interval.resamples} "
                        "searches rerun on resampled units"
                    )
                crossings = non_monotone_text(f, alpha)
                measured += f"; {counted}" + (f"; {spread}" if spread else "")
                measured += f"; {crossings}" if crossings else ""
                inside = slope_within(slope, low, high)
                if interval is not None:
                    # a censored resample's slope is open above: its interval reaches +inf
                    outcome = bootstrap_verdict(interval, Band(low, high))
                elif inside is None:
                    # censored: the slope's lower bound is inside the rule and its top is open,
                    # so the data cannot tell (not "not testable": the KS test could decide)
                    outcome = "undecided"
                else:
                    outcome = verdict(inside)
                if floor_slope is not None:
                    outcome = floor_outcome(outcome, floor_slope, slope, low, high)
                lo_end = floor_slope.at_least if floor_slope is not None else slope.at_least
                if interval is not None:
                    lo_end = min(lo_end, interval.low)
                if passes_below_a_cell(f, alpha) and (
                    (outcome == "reproduced" and math.isfinite(low))
                    or (outcome == "not reproduced" and lo_end > high)
                ):
                    # an N below some length's cell passed: its first pass may lie below the
                    # cell, so the statistic's low end is not known. A lower first pass only
                    # lowers the statistic: "below" stands, and so does "reproduced" on a rule
                    # with no lower edge ("fewer than 6 %")
                    outcome = "undecided"
                if outcome == "not reproduced":
                    # the side it falls on: "not reproduced" alone reads as "above" to most
                    hi_end = slope.upper if interval is None else max(slope.upper, interval.high)
                    # the side of everything the verdict read (cells' low ends, the point,
                    # the interval); a point on one side and its interval on the other have
                    # none, and no verdict either
                    side = direction(low, high, lo_end, hi_end)
                    band = f"[{low:g}, {high:g}]" if math.isfinite(low) else f"<= {high:g}"
                    if side:
                        measured = f"{side} the rule's {band}: {measured}"
                    else:
                        # the point on one side, its interval on the other: no side to name,
                        # and so no verdict either
                        outcome = "undecided"
                card.add(
                    *row,
                    measured,
                    rule,
                    outcome,
                    value=slope.at_least,
                    low=None if interval is None else interval.low,
                    high=None if interval is None else interval.high,
                    resamples=None if interval is None else interval.resamples,
                    side=side if outcome == "not reproduced" else None,
                )


def score(card: Scorecard, summary: pl.DataFrame, replicates, scoring: Scoring) -> None:
    """Table 1's rows of Algorithm 3 (the registry's entry point)."""
    claims(card, summary, scoring.analysis["critical_n"]["ks_alpha"], replicates)
