"""N*, the effective attention set size, of the study's trained models over their seeds: per rule
and context L, the geometric mean of the seeds' N* with its t-interval, the paired ratio to the
baseline's N* of the same seed, and its reading (docs/study.md, "How many keys each model needs").

Each seed's N* comes from attnlimits_workflow.effective_set.summarise of that model's jobs. The
statistics are the study's own (attnlimits_workflow.study): N* is a positive count, compared by
ratio, so its mean and interval are on the log scale, and the ratio's interval decides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from attnlimits.intervals import (
    beyond_ratio_sign_pvalue,
    log_t_interval,
    paired_log_ratios,
    paired_ratio,
)

from ..study_limits import NO_DIFFERENCE, ONE_SEED

FEWER, MORE = "fewer keys", "more keys"
CENSORED = "no verdict: a seed's N* is censored (above every N searched)"
# Every model of the study reads the same windows, so the seeds' spread leaves out the text's:
# a reading also needs, in every seed, the two models' window-bootstrap intervals apart.
NO_WINDOW_INTERVAL = (
    "no verdict: no window-bootstrap interval (too few windows, or too many resamples pass at "
    "no N searched)"
)
WINDOWS_OVERLAP = "no difference shown (the windows' intervals overlap in a seed)"
# what the t-interval and the windows decide, short of the sign test (review 38)
CANDIDATES = {
    reading: f"{reading}, a candidate only (the sign test over the seeds cannot decide it: "
    "more seeds)"
    for reading in (FEWER, MORE)
}
AT_FLOOR = "no verdict: N* = 1, the floor, in every seed of both"
CELLS_ONLY = "no verdict: N* known to its power-of-two cell only (effective_set.refine false)"
# what a withheld cell's short verdict leaves to the answer's sentence
WITHHELD_WHY = {AT_FLOOR: "N* cannot go below 1, so neither model can need fewer keys there"}


def seeds_frame(summaries: Mapping[tuple[str, int], pl.DataFrame]) -> pl.DataFrame:
    """One table of every model's N* summary (effective_set.summarise), keyed by its rule
    (``normalizer``) and training ``seed``, in the summaries' order (the rules' order is the
    study's, which the page's table keeps): the per-seed table the study writes."""
    frames = [
        s.with_columns(pl.lit(name).alias("normalizer"), pl.lit(seed, pl.Int64).alias("seed"))
        for (name, seed), s in summaries.items()
    ]
    if not frames:
        raise ValueError("no N* summaries: the study has no trained model")
    front = ["normalizer", "seed", "variant", "length"]
    table = pl.concat(frames, how="vertical_relaxed")
    return table.select(front + [c for c in table.columns if c not in front])


def over_seeds(
    per_seed: pl.DataFrame, baseline: str, level: float, ratio: float, variant: str
) -> pl.DataFrame:
    """Per rule (in first-appearance order) and L, ``variant``'s N* over the seeds: the
    geometric mean and its t-interval (log scale), every seed's N*, the paired ratio to
    ``baseline``'s N* of the same seed with its t-interval, and the reading: ``fewer keys``
    where the ratio's interval lies wholly at or below 1 / ``ratio``, ``more keys`` at or above
    ``ratio``, else ``no difference shown``. A censored seed (its N* only a lower bound) leaves
    no interval, no ratio and no verdict; one seed leaves no interval; N* = 1 (the search's
    floor) in every seed of both models leaves no verdict. The interval's low end is at
    least 1."""
    part = per_seed.filter(pl.col("variant") == variant)
    if part.is_empty():
        raise ValueError(f"no N* of variant {variant!r} in the study's tables")
    if baseline not in set(part["normalizer"]):
        raise ValueError(f"the baseline {baseline!r} has no N* of variant {variant!r}")
    rows = []
    names = list(dict.fromkeys(part["normalizer"].to_list()))
    for length in sorted(set(part["length"].to_list())):
        at = part.filter(pl.col("length") == length).sort("seed", maintain_order=True)
        base = at.filter(pl.col("normalizer") == baseline)
        for name in names:
            own = at.filter(pl.col("normalizer") == name)
            if own["seed"].to_list() != base["seed"].to_list():
                raise ValueError(
                    f"N* at L = {length}: {name} has seeds {own['seed'].to_list()}, "
                    f"{baseline} {base['seed'].to_list()}; the ratio pairs them seed by seed"
                )
            censored = bool(own["censored"].any())
            floors = cell_floors(own)
            own_cells = known_as_cells(own)
            in_cells = own_cells or known_as_cells(base)
            base_nll = float(own["base_nll_per_target"].mean())
            # a censored seed's N* is known from below: its lower bound stands in the mean
            values = [
                float(lb if c else n)
                for n, c, lb in own.select("n_star", "censored", "lower_bound").iter_rows()
            ]
            mean, low, high = log_t_interval(values, level)
            if censored or own_cells:
                # lower bounds or cell tops are no measurements: no t-interval (reviews 30, 34)
                low = high = math.nan
            elif not math.isnan(low):
                low = max(low, 1.0)  # N* >= 1 by definition; the log scale's interval is not
            r = r_low = r_high = sign_p = math.nan
            clipped = False
            base_values = [float(v) for v in base["n_star"].fill_null(0)]
            if name == baseline:
                verdict = "baseline"
            elif censored or bool(base["censored"].any()):
                verdict = CENSORED
            elif in_cells:
                # the tops of cells are no measurements: a ratio of them decides nothing
                verdict = CELLS_ONLY
            elif set(values) == set(base_values) == {1.0}:
                verdict = AT_FLOOR
            elif len(values) < 2:
                verdict = ONE_SEED
            else:
                r, r_low, r_high = paired_ratio(tuple(values), tuple(base_values), level)
                # N* >= 1: against a baseline at the floor in every seed no ratio is below 1,
                # and a rule at the floor in every seed has none above 1; the log scale's
                # interval is clipped to what the ratio can be, as the mean's is
                unclipped = (r_low, r_high)
                if set(base_values) == {1.0}:
                    r_low = max(r_low, 1.0)
                if set(values) == {1.0}:
                    r_high = min(r_high, 1.0)
                # no longer a t-interval where it moved: said beside it (review 47)
                clipped = (r_low, r_high) != unclipped
                verdict = (
                    FEWER if r_high <= 1.0 / ratio else MORE if r_low >= ratio else NO_DIFFERENCE
                )
                # N* is a small integer: seeds tie, and a t-interval of tied ratios has no
                # coverage (a zero-width interval decided 1 in 8 patterns of a boundary null,
                # review 38; withholding only the zero-width case was not monotone, review 37).
                # A decision needs the sign test too, which handles ties: with n seeds it
                # cannot go below 2^(1 - n), so 3 seeds give candidates, never verdicts.
                sign_p = beyond_ratio_sign_pvalue(
                    paired_log_ratios(tuple(values), tuple(base_values)), ratio
                )
                if verdict in (FEWER, MORE):
                    verdict = windows_apart(own, base, verdict)
                if verdict in (FEWER, MORE) and not sign_p <= 1.0 - level:
                    verdict = CANDIDATES[verdict]
            rows.append(
                {
                    "normalizer": name,
                    "variant": variant,
                    "length": int(length),
                    "seeds": len(values),
                    "n_star_mean": mean,
                    "n_star_low": low,
                    "n_star_high": high,
                    # a censored seed's value is its lower bound, marked (review 31)
                    "n_star_values": " ".join(
                        (">=" if c else "")
                        + (f"{lo:g}-" if lo is not None and not c and lo < v else "")
                        + f"{v:g}"
                        for v, c, lo in zip(values, own["censored"].to_list(), floors, strict=True)
                    ),
                    "censored": censored,
                    # a seed's N* known to its power-of-two cell only (effective_set.refine false)
                    "in_cells": own_cells,
                    "base_nll_per_target": base_nll,
                    "ratio": r,
                    "ratio_low": r_low,
                    "ratio_high": r_high,
                    "ratio_clipped": clipped,
                    "sign_p": sign_p,
                    "verdict": verdict,
                }
            )
    order = {n: i for i, n in enumerate(names)}
    return pl.DataFrame(rows).sort(
        pl.col("normalizer").replace_strict(order, return_dtype=pl.Int64), "length"
    )


def cell_floors(part: pl.DataFrame) -> list:
    """Each seed's least N* (effective_set.summarise's n_star_floor), None for a censored seed
    or a table written before the column existed."""
    if "n_star_floor" not in part.columns:
        return [None] * part.height
    return part["n_star_floor"].to_list()


def known_as_cells(part: pl.DataFrame) -> bool:
    """Whether any seed's N* is known to its power-of-two cell only (its floor below its N*)."""
    return any(
        lo is not None and n is not None and lo < n
        for lo, n in zip(cell_floors(part), part["n_star"].to_list(), strict=True)
    )


def windows_apart(own: pl.DataFrame, base: pl.DataFrame, verdict: str) -> str:
    """``verdict`` (fewer or more keys) where, in every seed, the rule's window-bootstrap interval
    of N* lies wholly on that side of the baseline's; else why not. Both tables hold one row per
    seed, in the same seed order."""
    bounds = ("n_star_low", "n_star_high")
    if any(own[c].null_count() or base[c].null_count() for c in bounds):
        return NO_WINDOW_INTERVAL
    if verdict == FEWER:
        apart = (own["n_star_high"] < base["n_star_low"]).all()
    else:
        apart = (own["n_star_low"] > base["n_star_high"]).all()
    return verdict if apart else WINDOWS_OVERLAP


def cell(row: Mapping) -> str:
    """One (rule, L) cell: 'reading: mean [low, high]; paired ratio xr [low, high]', the mean a
    lower bound ('>= ') where a seed is censored."""
    mean = (">= " if row["censored"] else "") + f"{row['n_star_mean']:.3g}"
    if row.get("in_cells"):
        # cell tops are no measurements: the seeds' cells, no mean (review 34)
        mean = f"cells {row['n_star_values']}"
    elif not math.isnan(row["n_star_low"]):
        mean += f" [{row['n_star_low']:.3g}, {row['n_star_high']:.3g}]"
    if not math.isnan(row["ratio"]):
        mean += (
            f"; paired ratio x{row['ratio']:.3g} [{row['ratio_low']:.3g}, {row['ratio_high']:.3g}]"
        )
        if row.get("ratio_clipped"):
            mean += " (clipped at 1: a side at N* = 1 in every seed)"
        if not math.isnan(row.get("sign_p", math.nan)):
            mean += f", sign test p = {row['sign_p']:.2g}"
    return f"{row['verdict']}: {mean}; NLL {row['base_nll_per_target']:.2f}"


def markdown(table: pl.DataFrame) -> str:
    """The page's table: a row per rule, a column per L."""
    lengths = sorted(set(table["length"].to_list()))
    header = "| normalizer | " + " | ".join(f"N* at L = {length}" for length in lengths) + " |"
    lines = [header, "|---|" + "---|" * len(lengths)]
    for name in dict.fromkeys(table["normalizer"].to_list()):
        own = {
            r["length"]: r for r in table.filter(pl.col("normalizer") == name).iter_rows(named=True)
        }
        lines.append(f"| {name} | " + " | ".join(cell(own[length]) for length in lengths) + " |")
    return "\n".join(lines)


def answer(
    table: pl.DataFrame,
    baseline: str,
    zero_weights: set[str] | None = None,
    level: float = 0.95,
) -> str:
    """The section's answer in words: the baseline's N* and N*/L at the shortest and longest L,
    then, per reading, the rules that read it at every L and those that read it at some; a rule
    of ``zero_weights`` (rows with exact zeros) is marked, as its N* is capped by its support.
    Where the seeds are too few for the sign test to reach 1 - ``level`` (2 / 2^n > 1 - level),
    no cell can be decided, and the answer says so instead of "at no L" (review 47)."""
    zero_weights = zero_weights or set()

    def named(name: str) -> str:
        return f"{name} (zero weights)" if name in zero_weights else name

    lengths = sorted(set(table["length"].to_list()))
    base = {
        r["length"]: r for r in table.filter(pl.col("normalizer") == baseline).iter_rows(named=True)
    }
    first, last = base[lengths[0]], base[lengths[-1]]

    def at_least(row: Mapping) -> str:
        return ">= " if row["censored"] else ""

    def needs(row: Mapping, length: int) -> str:
        if row.get("in_cells"):
            return f"N* in cells {row['n_star_values']} of L = {length} keys"
        share = row["n_star_mean"] / length
        return (
            f"N* = {at_least(row)}{row['n_star_mean']:.3g} of L = {length} keys "
            f"(N*/L {at_least(row) or '= '}{share:.2g})"
        )

    parts = [
        f"{baseline} needs {needs(first, lengths[0])} and {needs(last, lengths[-1])}, geometric "
        "means over the seeds."
    ]
    others = table.filter(pl.col("normalizer") != baseline)
    seeds = int(others["seeds"].max()) if others.height else 0
    floor = min(1.0, 2.0 / 2.0**seeds)  # the two-sided sign test's least p over n seeds
    if others.height and floor > 1.0 - level:
        candidates = others.filter(pl.col("verdict").is_in(list(CANDIDATES.values())))
        parts.append(
            f"With {seeds} seeds no N* cell can be decided: the two-sided sign test's least p is "
            f"2 / 2^{seeds} = {floor:.3g}, above {1.0 - level:.3g}"
            + ("." if candidates.height else "; no cell is even a candidate.")
        )
    for reading in (FEWER, MORE):
        every, some = [], []
        for name in dict.fromkeys(others["normalizer"].to_list()):
            found = others.filter(pl.col("normalizer") == name)["verdict"].to_list()
            if all(v == reading for v in found):
                every.append(named(name))
            elif reading in found:
                at = others.filter((pl.col("normalizer") == name) & (pl.col("verdict") == reading))
                some.append(f"{named(name)} (L = {', '.join(map(str, at['length'].to_list()))})")
        said = [f"at every L: {', '.join(every)}"] if every else []
        said += [f"at some: {', '.join(some)}"] if some else []
        if not said and floor > 1.0 - level:
            continue  # not decidable: said above, not "at no L", which reads as a finding
        parts.append(
            f"{reading[0].upper()}{reading[1:]} than {baseline} "
            + ("; ".join(said) if said else "at no L")
            + "."
        )
    for reading, candidate in CANDIDATES.items():
        at = others.filter(pl.col("verdict") == candidate)
        if at.height:
            listed = ", ".join(
                f"{named(n)} (L = {length})"
                for n, length in at.select("normalizer", "length").rows()
            )
            parts.append(
                f"Candidates for {reading} (the t-interval and every seed's windows say so, the "
                f"sign test over {at['seeds'][0]} seeds cannot): {listed}."
            )
    if any("(zero weights)" in part for part in parts):
        parts.append(
            "A rule marked (zero weights) puts exact zeros on keys: deleting them changes "
            "nothing, so its N* is at most the largest number of nonzero weights of any row."
        )
    withheld = sorted({v for v in others["verdict"].to_list() if v.startswith("no verdict")})
    if withheld:
        parts.append(
            " ".join(
                f"Withheld: {v}" + (f" ({WITHHELD_WHY[v]})." if v in WITHHELD_WHY else ".")
                for v in withheld
            )
        )
    return " ".join(parts)


def held_out_error(windows: int, longest: int, held_out_tokens: int) -> str | None:
    """The windows N* reads are the corpus's first ``windows`` x ``longest`` tokens; they must lie
    in the ``held_out_tokens`` the models never trained on."""
    need = int(windows) * int(longest)
    if need <= held_out_tokens:
        return None
    return (
        f"study.effective_set: {windows} windows of {longest} tokens ({need}) exceed the "
        f"{held_out_tokens} held-out tokens (study.training.validation_fraction): N* would read "
        "training text; lower study.effective_set.windows"
    )
