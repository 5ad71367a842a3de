"""Table 1: the reproduction scorecard. One row per quantitative claim of the paper, this run's
value, and a verdict by the rule written in the row itself. The claims, the paper's values and the
thresholds are data (workflow/resources/paper_claims.yaml); this script measures."""

import json
import math

import numpy as np
import polars as pl
import yaml

from attnlimits.critical import censored_slope, linear_fit, slope_within
from attnlimits.separability import UPPER_BOUND_FLOOR
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import protocol_text
from attnlimits_workflow.tables import write_csv, write_latex, write_markdown

log = job_logger(snakemake, "table1")
inp, out, a = snakemake.input, snakemake.output, snakemake.params.analysis
dist = pl.read_csv(inp.distance)
crit = pl.read_csv(inp.critical_n)
sep = pl.read_csv(inp.separability).sort("N")
grad = pl.read_csv(inp.gradient).sort("eps", "T")
van = pl.read_csv(inp.vanishing).sort("L")
# columns that are empty for some checks (no per-row counts under last_row) read as text
VIOLATION_TYPES = {
    **{
        c: pl.Int64
        for c in ("rows", "violated_rows", "not_testable_rows", "vacuous_rows", "mask_only_rows")
    },
    "median_log10_slack": pl.Float64,
    "vacuous_reason": pl.String,
    "note": pl.String,
    "by_n": pl.String,
}
viol = pl.concat([pl.read_csv(p, schema_overrides=VIOLATION_TYPES) for p in inp.violations])
CLAIMS = yaml.safe_load(open(inp.claims))
rows = []
# The claim's stable id (its key in paper_claims.yaml, ":variant" where one claim gives several
# rows, "bound:<name>" for a bound), which the cross-model scorecard joins on: the claim texts
# name each run's own grid values.
claim_id = ""


def texts(key: str, variant: str | None = None, **names) -> tuple[str, str, str]:
    """The claim, the paper's value and the rule of a claim, filled from its entry and ``names``."""
    global claim_id
    claim_id = key if variant is None else f"{key}:{variant}"
    values = {**CLAIMS[key], **names}
    return tuple(CLAIMS[key][part].format(**values) for part in ("claim", "paper", "rule"))


def add(claim, paper, measured, rule, verdict):
    rows.append(
        {
            "claim_id": claim_id,
            "claim": claim,
            "paper": paper,
            "measured": measured,
            "verdict_rule": rule,
            "verdict": verdict,
        }
    )


def verdict(ok):
    return "not applicable" if ok is None else ("reproduced" if ok else "not reproduced")


run = json.load(open(inp.run))
# A causal model under the paper's protocol reads each row's masked keys two ways, both
# measured in the same jobs: "non_selected" (the paper's L x L matrices) and "prefix".
masked = a["all_rows"]["masked"]
other_masked = "prefix" if masked == "non_selected" else "non_selected"
readings = (
    [(masked, ""), (other_masked, "_other_masked")]
    if run["causal"] and a["protocol"] == "all_rows"
    else [(None, "")]
)


def reading_text(reading):
    if reading is None:
        return ""
    paper = " (the paper's L x L reading)" if reading == "non_selected" else ""
    return f" [masked keys: {reading}{paper}]"


n_fixed, l_fixed = a["distance"]["n_fixed"], a["distance"]["length_fixed"]
c = CLAIMS["linear_in_length"]
f = dist.filter(pl.col("N") == n_fixed).sort("L")
if f.height >= c["min_lengths"]:
    for reading, suffix in readings:
        claim, paper, rule = texts(
            "linear_in_length", variant=reading if suffix else None, n=n_fixed
        )
        _, slope, r2 = linear_fit(f["L"].to_numpy(), f[f"distance{suffix}_median"].to_numpy())
        measured = f"R^2 = {r2:.3f}, slope = {slope:.3g}"
        if reading == "non_selected":
            # Each of row t's L - t - 1 masked keys adds ||s_t|| to d~: a term that grows
            # linearly in L by construction, whatever the attention does.
            add(
                claim + reading_text(reading),
                paper,
                measured + "; dominated by the masked keys' sum_t (L - t - 1) ||s_t||",
                rule,
                "vacuous",
            )
        else:
            # By the triangle inequality d~ = (L - N) ||s|| within (1 - a_N) max ||x||: the fit
            # tests that ||s|| (the top-N set's pull) holds up as L grows, no more.
            add(
                claim + reading_text(reading),
                paper,
                measured + "; d~ ~ (L - N) ||s||, so this tests that ||s|| holds up in L",
                rule,
                verdict(r2 >= c["min_r2"] and slope > 0),
            )
else:
    claim, paper, rule = texts("linear_in_length", n=n_fixed)
    add(
        claim,
        paper,
        f"fewer than {c['min_lengths']} lengths",
        f"needs >= {c['min_lengths']} lengths",
        verdict(None),
    )

c = CLAIMS["plateau_in_n"]
claim, paper, rule = texts("plateau_in_n", length=l_fixed)
f = dist.filter(pl.col("L") == l_fixed).sort("N")
big = f.filter(pl.col("N") >= c["from_n"])
if big.height >= 2:
    for reading, suffix in readings:
        claim, paper, rule = texts(
            "plateau_in_n", variant=reading if suffix else None, length=l_fixed
        )
        d20, dmax = big[f"distance{suffix}_median"][0], big[f"distance{suffix}_median"][-1]
        change = abs(dmax - d20) / d20
        add(
            claim + reading_text(reading),
            paper,
            f"median d~ changes {100 * change:.1f}% from N = {big['N'][0]} to {big['N'][-1]}",
            rule,
            verdict(change <= c["max_relative_change"]),
        )
else:
    add(
        claim,
        paper,
        f"grid has < 2 values of N >= {c['from_n']}",
        f"needs N >= {c['from_n']} values",
        verdict(None),
    )

# Algorithm 3's critical N, scored by each of the paper's two wordings (critical_n.rules) under
# each reading of a causal row's masked keys; the slope through the origin is known only from below
# where a length's search ended without a pass (attnlimits.critical.CensoredSlope).
READINGS = {
    "non_selected": "masked keys non-selected: the paper's L x L rows",
    "prefix": "masked keys left out: prefix rows",
    "both": "no masked keys: both readings coincide",
}
alpha = a["critical_n"]["ks_alpha"]
crit_readings = set(crit["masked"].unique().to_list())
for reading in ("non_selected", "prefix"):
    source = "both" if "both" in crit_readings else reading
    for kind, label in (("monte_carlo", "Monte-Carlo E"), ("closed_form", "Thm 1.2 term")):
        f = crit.filter((pl.col("masked") == source) & (pl.col("expectation") == kind)).sort("L")
        blind = f.filter(pl.col("ks_min_pvalue") >= alpha)
        censored = f.filter(pl.col("censored"))
        slope = censored_slope(
            f["L"].to_numpy(),
            f["N_crit"].cast(pl.Float64).to_numpy(),
            f["censored"].to_numpy(),
            f["top_N"].to_numpy(),
        )
        d_cols = [col for col in f.columns if col.startswith("D_at_")]
        spread = "; ".join(
            f"D at {col[5:-1]} L {f[col].min():.2f}-{f[col].max():.2f}" for col in d_cols[:2]
        )
        for rule_name, c in CLAIMS["critical_n"]["rules"].items():
            claim_id = f"critical_n:{kind}:{rule_name}" + (":prefix" if reading == "prefix" else "")
            values = {**c, "expectation": label, "reading": READINGS[source]}
            claim, paper, rule = (c[part].format(**values) for part in ("claim", "paper", "rule"))
            low, high = c.get("low", -math.inf), c.get("high", c["value"])
            if reading == "prefix" and source == "both":
                add(
                    claim, paper, "the same rows as the L x L reading above", rule, "not applicable"
                )
                continue
            if f.height == 0:
                add(claim, paper, "no critical-N rows", rule, verdict(None))
                continue
            if blind.height:
                # The KS test cannot reject at alpha with so few samples: every N "passes".
                add(
                    claim,
                    paper,
                    f"KS over {blind['ks_samples'].min()} values per side cannot reject at alpha = "
                    f"{alpha} (smallest attainable p {blind['ks_min_pvalue'].max():.3g}) at "
                    f"{blind.height}/{f.height} lengths",
                    rule,
                    "not testable",
                )
                continue
            counted = f"KS over {f['ks_samples'].max()} values per side"
            if slope.censored:
                # a censored length's N_crit is >= its top N: the slope is bounded below only
                top = (
                    "L - 1" if (censored["top_N"] == censored["L"] - 1).all() else "its top N tried"
                )
                measured = (
                    f"slope >= {slope.at_least:.3f}: {slope.censored}/{f.height} lengths censored "
                    f"(no pass up to N = {top}, counted as N_crit >= {top})"
                )
                if slope.censored < f.height:
                    measured += f"; through the found lengths only {slope.found:.3f}"
            else:
                measured = f"slope {slope.found:.3f} ({f.height}/{f.height} lengths found)"
            measured += f"; {counted}" + (f"; {spread}" if spread else "")
            inside = slope_within(slope, low, high)
            # censored: the slope's lower bound is inside the rule and its top is open
            outcome = "not testable" if inside is None else verdict(inside)
            add(claim, paper, measured, rule, outcome)

c = CLAIMS["saturation"]
tail = sep.filter(pl.col("N") >= c["from_n"])
if tail.height:
    zero = tail["zero_weight_selected_mean"].max()
    for reading, suffix in readings:
        claim, paper, rule = texts("saturation", variant=reading if suffix else None)
        lo, hi = tail[f"ratio{suffix}_median"].min(), tail[f"ratio{suffix}_median"].max()
        # the zero-weight count is the configured reading's (under prefix a causal row has none)
        zero_text = (
            f"; zero-weight top-N tokens (never counted in N_s, N the denominator): mean <= "
            f"{zero:.3g} per row"
            if not suffix
            else ""
        )
        add(
            claim + reading_text(reading),
            paper,
            f"median N_s/N in [{lo:.2f}, {hi:.2f}] for N >= {c['from_n']}{zero_text}",
            rule,
            verdict(lo >= c["low"] and hi <= c["high"]),
        )
else:
    claim, paper, rule = texts("saturation")
    add(
        claim,
        paper,
        f"no N >= {c['from_n']} in the grid",
        f"needs N >= {c['from_n']}",
        verdict(None),
    )
# The bound never falls below e^(-1/16) = 0.939 and N_s/N <= 1, so at an N whose largest N_s/N
# is >= 1 - max_gap the gap cannot exceed max_gap: only the other N can decide the claim.
max_gap = CLAIMS["upper_bound_tracks"]["max_gap"]
per_n = sep.select(
    "N", "ratio_max", gap=(pl.col("upper_bound_mean") - pl.col("ratio_max"))
).drop_nulls("gap")
deciding = per_n.filter(pl.col("ratio_max") < 1.0 - max_gap)
claim, paper, rule = texts("upper_bound_tracks")
gaps = ", ".join(f"N={n}: {g:+.2f}" for n, g in zip(per_n["N"], per_n["gap"], strict=True))
bound_span = sep.filter(pl.col("N") > 1)["upper_bound_mean"].drop_nulls()
measured = (
    f"bound - max N_s/N per N: {gaps}; the bound cannot fall below e^(-1/16) = "
    f"{UPPER_BOUND_FLOOR:.3f} (here {bound_span.min():.3f}-{bound_span.max():.3f} over N >= 2), "
    f"so the claim reduces to max N_s/N >= bound - {max_gap:.2f}, and N with max N_s/N >= "
    f"{1 - max_gap:.2f} cannot fail ({per_n.height - deciding.height} of {per_n.height})"
    if bound_span.len()
    else f"bound - max N_s/N per N: {gaps}"
)
add(
    claim,
    paper,
    measured,
    rule,
    "vacuous" if not deciding.height else verdict(bool((deciding["gap"].abs() <= max_gap).all())),
)

small_eps = grad.filter(pl.col("eps") == grad["eps"].min())
c = CLAIMS["gradient_inverse_t"]
claim, paper, rule = texts("gradient_inverse_t")
low = small_eps.filter(pl.col("T") < c["below_t"])
if low.height >= 2:
    _, s, _ = linear_fit(
        np.log10(low["T"].to_numpy()), np.log10(low["g_max_over_heads"].to_numpy())
    )
    add(
        claim,
        paper,
        f"log-log slope {s:.2f} (eps = {grad['eps'].min():g})",
        rule,
        verdict(c["low"] <= s <= c["high"]),
    )
else:
    add(
        claim,
        paper,
        f"fewer than 2 temperatures below {c['below_t']}",
        f"needs 2 T < {c['below_t']}",
        verdict(None),
    )
c = CLAIMS["gradient_drop"]
claim, paper, rule = texts("gradient_drop")
hi_t = small_eps.filter((pl.col("T") - c["high_t"]).abs() <= 1e-9 * c["high_t"])
lo_t = small_eps.filter((pl.col("T") - c["low_point_t"]).abs() <= 1e-9 * c["low_point_t"])
if hi_t.height and lo_t.height:
    drop = math.log10(lo_t["g_max_over_heads"][0] / hi_t["g_max_over_heads"][0])
    add(
        claim,
        paper,
        f"{drop:.2f} decades (largest head's g at T = {c['low_point_t']:g} vs T = {c['high_t']:g})",
        rule,
        verdict(drop >= c["min_decades"]),
    )
else:
    add(
        claim,
        paper,
        f"T grid lacks T = {c['low_point_t']:g} or T = {c['high_t']:g}",
        "needs both",
        verdict(None),
    )
if van.height >= 2:
    _, s, _ = linear_fit(
        np.log10(van["L"].to_numpy()), np.log10(van["max_weight_median"].to_numpy())
    )
    claim, paper, rule = texts("vanishing")
    add(
        claim,
        paper,
        f"log-log slope of median max weight {s:.2f}",
        rule,
        verdict(s <= CLAIMS["vanishing"]["max_slope"]),
    )


def bound_detail(r: dict) -> str:
    """What the counts leave out: the untestable and vacuous samples, the rows, the slack."""
    parts = [f"{r['not_testable']} not testable, {r['vacuous']} vacuous, {r['not_applicable']} n/a"]
    if r.get("violated_rows") is not None:
        parts.append(
            f"rows: {r['violated_rows']} of {r['rows']} violate, {r['vacuous_rows']} vacuous"
        )
    if r.get("note"):
        parts.append(r["note"])
    if r.get("mask_only_rows"):
        parts.append(
            f"{r['mask_only_rows']} causal rows t + 1 <= N left out (every visible key selected: "
            "their bounds are set by the masked keys)"
        )
    if r.get("median_log10_slack") is not None and math.isfinite(r["median_log10_slack"]):
        parts.append(f"median log10 slack {r['median_log10_slack']:.2g}")
    if r.get("vacuous") and r.get("vacuous_reason"):
        parts.append(f"vacuous: {r['vacuous_reason']}")
    if r.get("by_n"):
        parts.append(f"per N: {r['by_n']}")
    return "; ".join(parts)


for r in viol.iter_rows(named=True):
    claim_id = f"bound:{r['bound']}"
    # A check counts where it could fail; samples whose bound lies within the check's tolerance
    # of the quantity's range are "not testable", those where no data could fail it "vacuous",
    # never "holds" (attnlimits.checks).
    rule = f"0 violations; tolerance {r['tolerance']}"
    if r["checked"] == 0:
        add(
            f"bound holds: {r['bound']}",
            "holds",
            f"0 checked ({bound_detail(r)})",
            rule,
            "vacuous"
            if r["vacuous"]
            else ("not testable" if r["not_testable"] else "not applicable"),
        )
    else:
        add(
            f"bound holds: {r['bound']}",
            "holds",
            f"{r['violations']} of {r['checked']} {r['unit']} violate ({bound_detail(r)})",
            rule,
            "reproduced" if r["violations"] == 0 else "not reproduced",
        )

table = pl.DataFrame(rows)
header = f"Reproduction scorecard: {run['model']} ({run['weights']}), corpus {run['corpus']}, {run['chunks']} chunks; {protocol_text(run)}."
write_csv(table, out.csv)
write_markdown(table.drop("claim_id"), out.md, header)
write_latex(table.drop("claim_id"), out.tex, header, "p{4.2cm}p{2.2cm}p{4.2cm}p{3.2cm}p{1.8cm}")
log.info("table1: %d claims, %d reproduced", table.height, (table["verdict"] == "reproduced").sum())
