"""docs/findings.md's functional section: N*, the effective attention set size, of every model
entry whose run has effective_set.enabled, beside the paper's critical N, read from the entries'
own N* tables (tables/<entry>/effective_set.csv and ..._correlations.csv, rule
effective_set_report)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from ..tables import markdown_table
from .effective_set_report import TREND_CAVEAT, undefined_reason

PRIMARY = "attention-delete"

# The follow-up's published N*_5 % at L = 1024 (its two tables, as docs/findings.md quotes them:
# 50 OpenWebText documents; and the same final 128 targets at every L), per model
PUBLISHED_TAU = 0.05
PUBLISHED_AT_1024 = {
    "Llama-3-8B": (16, 32),
    "Mistral-7B": (14,),
    "Llama-3.2-1B": (18,),
    "Qwen2.5-7B": (33,),
    "Qwen2.5-1.5B": (39,),
    "Gemma-7B": (226, 280),
    "Gemma-2-9B": (11,),
}


def _n_star(row: Mapping) -> str:
    if row["censored"]:
        return f"> {int(row['lower_bound']) - 1} (censored)"
    text = f"{int(row['n_star'])}"
    floor = row.get("n_star_floor")
    if floor is not None and floor < row["n_star"]:
        # effective_set.refine false: only the power-of-two cell is known (review 31)
        text = f"{int(floor)}-{text} (grid cell)"
    if row["n_star_low"] is not None:
        text += f" [{row['n_star_low']:g}, {row['n_star_high']:g}]"
    return text


def _cell_columns(row: Mapping) -> list[str]:
    """N*/L and dNLL_rel at N*: where N* is known only to its cell (effective_set.refine false),
    the share as the cell and the loss named as the top's (review 32)."""
    share, dnll = _share(row["n_star_over_length"]), _share(row["dnll_at_n_star"])
    floor = row.get("n_star_floor")
    if floor is not None and row["n_star"] is not None and floor < row["n_star"]:
        length = row["length"]
        share = f"{floor / length:.3g}-{row['n_star'] / length:.3g}"
        dnll += f" (at {int(row['n_star'])})"
    return [share, dnll]


def _share(value) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _critical_share(row: Mapping, column: str) -> str:
    """N_crit/L of one expectation: '>= ' where censored, its grid cell '(a, b]' where the
    list's N below it did not pass (the value is the cell's top, not a point); 'KS blind' where
    no N could fail (its value says nothing of the data)."""
    if row.get(column.replace("_over_L_", "_blind_")):
        return f"{_share(row[column])} (KS blind)"
    if row.get(column.replace("_over_L_", "_censored_")):
        return ">= " + _share(row[column])
    low = row.get(column.replace("_over_L_", "_cell_low_"))
    if low is not None and row[column] is not None:
        return f"({low:.3g}, {row[column]:.3g}]"
    return _share(row[column])


def shape_sentence(table: pl.DataFrame, variant: str = PRIMARY) -> str:
    """Does N* grow with L, and does N*/L fall (the follow-up paper's two observations)? Read off
    the uncensored N* of ``variant``, step by step along L."""
    part = table.filter((pl.col("variant") == variant) & ~pl.col("censored")).sort("length")
    if part.height < 2:
        return f"Fewer than two lengths with an uncensored {variant} N*: no shape to read."
    if "n_star_floor" in part.columns and (part["n_star_floor"] < part["n_star"]).any():
        # a cell's top is no measurement: two tops may share a cell (review 32)
        return (
            f"N* ({variant}) is known to power-of-two cells at some L (effective_set.refine "
            "false): no step along L is read."
        )
    n, share = part["n_star"].to_list(), part["n_star_over_length"].to_list()
    lengths = part["length"].to_list()
    grows = sum(b > a for a, b in zip(n, n[1:], strict=False))
    falls = sum(b < a for a, b in zip(share, share[1:], strict=False))
    # L grows at every step: where N* does not, N*/L falls whatever the model does (review 30)
    mechanical = sum(
        s1 < s0 and b <= a for a, b, s0, s1 in zip(n, n[1:], share, share[1:], strict=False)
    )
    steps = len(n) - 1

    def count(k: int) -> str:
        return "at every step" if k == steps else f"at {k} of {steps} steps"

    said = (
        f" ({mechanical} of them where N* did not grow, which L's growth alone gives)"
        if mechanical
        else ""
    )
    return (
        f"Over L = {', '.join(map(str, lengths))}, N* ({variant}) grows {count(grows)} "
        f"({' -> '.join(map(str, n))}) and N*/L falls {count(falls)} "
        f"({' -> '.join(f'{s:.3g}' for s in share)}){said}; uncensored lengths only, point "
        "values: the intervals above say which steps the chunks resolve."
    )


def published_sentence(table: pl.DataFrame, tau: float, variant: str = PRIMARY) -> str:
    """Where the entry's N*/L at L = 1024 falls against the follow-up's published N*_5 % there
    (review 48: the page quoted them and compared nothing), read by its interval where it has
    one; not compared at another tau or without an uncensored N* at 1024."""
    if abs(tau - PUBLISHED_TAU) > 1e-12:
        return f"The follow-up's numbers are N*_5 %; this entry's tau is {tau:g}: not compared."
    row = table.filter(
        (pl.col("variant") == variant) & (pl.col("length") == 1024) & ~pl.col("censored")
    )
    if row.height == 0:
        return f"No uncensored {variant} N* at L = 1024, the follow-up's length: not compared."
    r = row.row(0, named=True)
    values = [n for ns in PUBLISHED_AT_1024.values() for n in ns]
    least, most = min(values) / 1024, max(values) / 1024
    low = r["n_star_low"] if r["n_star_low"] is not None else r["n_star"]
    high = r["n_star_high"] if r["n_star_high"] is not None else r["n_star"]
    low, high = low / 1024, high / 1024
    if low > most:
        where = "above every published model's"
    elif high < least:
        where = "below every published model's"
    elif least <= low and high <= most:
        where = "within the published range"
    else:
        where = "reaching beyond the published range on one side; the point lies " + (
            "within it" if least <= r["n_star_over_length"] <= most else "outside it"
        )
    interval = "" if low == high else f" [{low:.3g}, {high:.3g}]"
    return (
        f"Against the published numbers: at L = 1024 this entry's N*/L ({variant}) is "
        f"{r['n_star_over_length']:.3g}{interval}, {where} ({least:.3g} to {most:.3g}: "
        f"{min(values)} to {max(values)} of 1024 keys over the follow-up's two tables)."
    )


def resolved_steps(table: pl.DataFrame, variant: str = PRIMARY) -> str:
    """How many steps along L the intervals resolve: N* growing (the next interval wholly
    above) and N*/L falling (the next interval over its L wholly below), from the entry's
    paired-chunk intervals (review 48: the point values' steps were read alone)."""
    part = table.filter((pl.col("variant") == variant) & ~pl.col("censored")).sort("length")
    if part.height < 2 or part["n_star_low"].null_count():
        return ""
    rows = part.to_dicts()
    steps = len(rows) - 1
    grows = sum(b["n_star_low"] > a["n_star_high"] for a, b in zip(rows, rows[1:], strict=False))
    falls = sum(
        b["n_star_high"] / b["length"] < a["n_star_low"] / a["length"]
        for a, b in zip(rows, rows[1:], strict=False)
    )
    return (
        f"The intervals resolve {grows} of {steps} steps of N* growing and {falls} of {steps} of "
        "N*/L falling (the next interval wholly beyond the last)."
    )


def correlation_answer(correlations: pl.DataFrame, variant: str = PRIMARY) -> str:
    """The answer in one sentence: with n lengths even a perfect rank agreement has a two-sided
    permutation p of 2 / n!, so at n <= 4 (1/12) no rank correlation can be told from chance."""
    rows = correlations.filter(pl.col("variant") == variant)
    if rows.height == 0:
        return ""
    n = int(rows["lengths"].max())
    least = 2.0 / math.factorial(n) if n >= 1 else 1.0
    if least > 0.05:
        return (
            f"Answer: not determinable here. Over {n} lengths even a perfect rank agreement has "
            f"a two-sided permutation p of 2 / {n}! = {least:.3g}, above 0.05."
        )
    return "Answer: a description only (the caveat above); no test of it is run."


def correlation_sentence(correlations: pl.DataFrame, variant: str = PRIMARY) -> str:
    """Whether N*/L and N_crit/L move together across L (Spearman, from the entry's table)."""
    rows = correlations.filter(pl.col("variant") == variant)
    parts = []
    for r in rows.iter_rows(named=True):
        if r["spearman_rho"] is None:
            parts.append(f"against N_crit/L ({r['expectation']}): {undefined_reason(r['lengths'])}")
        else:
            parts.append(
                f"against N_crit/L ({r['expectation']}): Spearman rho {r['spearman_rho']:+.2f} "
                f"over {r['lengths']} lengths"
            )
    if not parts:
        return f"No {variant} N* to set against the critical N."
    return (
        f"Do the geometric and the functional limit move together across L? N*/L ({variant}) "
        + "; ".join(parts)
        + f" ({TREND_CAVEAT}; N_crit ranked by its list cell, lengths whose cells overlap tied; "
        "N* where it is known to the integer)."
    )


def entry_block(name: str, table: pl.DataFrame, correlations: pl.DataFrame, tau: float) -> str:
    """One entry's table (variant, L, N* with its interval, N*/L, N_crit/L per expectation), its
    figure, the shape and the correlation."""
    crit = sorted(c for c in table.columns if c.startswith("N_crit_over_L_"))
    header = ["variant", "L", f"N*_{tau:g} [interval]", "N*/L", "dNLL_rel at N*", "chunks"]
    header += [f"N_crit/L ({c.removeprefix('N_crit_over_L_')})" for c in crit]
    rows = [
        [
            r["variant"],
            str(r["length"]),
            _n_star(r),
            *_cell_columns(r),
            str(r["chunks"]),
            *[_critical_share(r, c) for c in crit],
        ]
        for r in table.sort("variant", "length").iter_rows(named=True)
    ]
    return "\n\n".join(
        [
            f"### {name}",
            markdown_table(header, rows),
            *(
                [
                    "N_crit/L: '>= ' where no N of the list passed (censored); '(a, b]' the grid "
                    "cell of Algorithm 3's list, from the N tried before the first pass to "
                    "N_crit, where the list skipped N between them; 'KS blind' where the KS "
                    "test cannot reject at its sample count, so no N could fail."
                ]
                if crit
                else []
            ),
            f"![N* of {name}](findings/{name}.effective_set.png)",
            " ".join(x for x in (shape_sentence(table), resolved_steps(table)) if x),
            published_sentence(table, tau),
            " ".join(
                x
                for x in (correlation_sentence(correlations), correlation_answer(correlations))
                if x
            ),
        ]
    )


def functional_section(
    tables: Mapping[str, pl.DataFrame],
    correlations: Mapping[str, pl.DataFrame],
    taus: Mapping[str, float],
) -> str:
    """The section's generated part: a block per entry with N*, or the line saying none has."""
    if not tables:
        return (
            "No model entry of this run has `effective_set.enabled: true`, so this run measured "
            "no N*."
        )
    return "\n\n".join(
        entry_block(name, tables[name], correlations[name], taus[name]) for name in tables
    )
