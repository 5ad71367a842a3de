"""docs/findings.md's functional section: N*, the effective attention set size, of every model
entry whose run has effective_set.enabled, beside the paper's critical N, read from the entries'
own N* tables (tables/<entry>/effective_set.csv and ..._correlations.csv, rule
effective_set_report)."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ..tables import markdown_table
from .effective_set_report import TREND_CAVEAT, undefined_reason

PRIMARY = "attention-delete"


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
            shape_sentence(table),
            correlation_sentence(correlations),
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
