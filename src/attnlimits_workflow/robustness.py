"""Whether a claim's verdict survives the paper's open choices and another text.

A claim is **robust** over a set of alternatives (readings of the paper, texts) when its verdict is
the same under every one of them, and **fragile** otherwise; a fragile claim names the
alternatives whose verdict differs from the reference one (the configured default reading, the
first text). Alternatives without a verdict (``no verdict``, ``not applicable``, a missing value)
neither confirm nor flip a claim; a claim with fewer than two alternatives that have a verdict
cannot be called robust, and is ``untested`` across that axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

ROBUST = "robust"
FRAGILE = "fragile"
UNTESTED = "untested"
NO_VERDICTS = frozenset({"no verdict", "not applicable", "", None})


def robustness(
    verdicts: pl.DataFrame, *, over: str, within: Sequence[str], reference: str
) -> pl.DataFrame:
    """Per group of ``within`` columns (e.g. claim, model): ``over``'s alternatives compared.

    ``verdicts`` holds one row per (``within``..., ``over``) with a ``verdict`` column.
    ``reference``: the alternative the others are compared with (a fragile claim names what
    flips it relative to this one). Returns ``within`` + ``robustness`` (robust, fragile or
    untested), ``verdict`` (the shared one when robust, the reference's otherwise),
    ``alternatives`` (how many had a verdict) and ``flipped_by`` ("reading: verdict; ...")."""
    missing = {over, "verdict", *within} - set(verdicts.columns)
    if missing:
        raise ValueError(f"verdict table lacks columns {sorted(missing)}")
    rows = []
    for key, group in verdicts.sort(over).group_by(list(within), maintain_order=True):
        decided = [
            (alt, v)
            for alt, v in zip(group[over].to_list(), group["verdict"].to_list(), strict=True)
            if v not in NO_VERDICTS
        ]
        by_alt = dict(decided)
        ref_verdict = by_alt.get(reference, decided[0][1] if decided else None)
        flipped = [(alt, v) for alt, v in decided if v != ref_verdict]
        if len(decided) < 2:
            status = UNTESTED
        else:
            status = FRAGILE if flipped else ROBUST
        rows.append(
            {
                **dict(zip(within, key, strict=True)),
                "robustness": status,
                "verdict": ref_verdict,
                "alternatives": len(decided),
                "flipped_by": "; ".join(f"{alt}: {v}" for alt, v in flipped),
            }
        )
    schema = {c: verdicts.schema[c] for c in within} | {
        "robustness": pl.String,
        "verdict": pl.String,
        "alternatives": pl.Int64,
        "flipped_by": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")
