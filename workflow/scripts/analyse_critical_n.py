"""Critical top-N at one L: smallest N where a KS test cannot tell d~ from the expected distance
(both the paper's closed-form term and the Monte-Carlo expectation), by a safeguarded
regula falsi on the KS statistic (attnlimits.critical.critical_n_search)."""

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits.critical import BlockedDistances, critical_n_search, ks_min_pvalue, ks_test
from attnlimits_workflow.jobs import Timer, blocks, job_logger, write_table
from attnlimits_workflow.packs import read_pack
from attnlimits_workflow.streams import Stream, stream_rng

log = job_logger(snakemake, "critical_n")
timer = Timer()
L = int(snakemake.wildcards.length)
p = snakemake.params
samples = read_pack(snakemake.input.pack)
# N per pass over the rows in the all-rows search: a pass costs one sort per row plus one
# evaluation per N, so a batch amortises the sort without computing far past an early N_crit.
CRITICAL_N_BATCH = 8
S = samples.weights.shape[0]
log.info("L=%d: %d samples loaded in %s", L, S, timer)
if p.protocol == "all_rows":
    # Algorithm 3: for N in an increasing list, KS between the per-head means (over every row)
    # of d~ and of E; N_crit is the first N the test does not reject. The closed form (the
    # paper's) and the Monte-Carlo E (ours) are searched side by side on the same rows, each
    # stopping at its own first pass. N is taken in batches: one pass over the rows serves a
    # whole batch (one sort per row for every N), and a small N_crit does not pay for the list.
    from attnlimits.protocol import (
        critical_n_list,
        row_critical_statistics,
        sampled_rows,
        search_in_batches,
    )
    from attnlimits_workflow.rows import pool_chunks, row_means

    settings = p.all_rows
    grid = critical_n_list(L, settings["critical_n_fractions"])
    mc_rows = sampled_rows(L, settings["mc_rows"])

    def evaluate(ns: list[int], pending: list[str]) -> dict[str, np.ndarray]:
        def per_row(block, logits, rows, sample):
            # Monte-Carlo subsets drawn per (sample, block of rows), never per N or per batch:
            # a value does not depend on which N the search visits.
            rng = stream_rng(p.seed, Stream.CRITICAL_N_MONTE_CARLO, L, sample, rows[0])
            drawn = np.nonzero(np.isin(rows, mc_rows))[0]  # analysis.all_rows.mc_rows
            mc = "monte_carlo" in pending and drawn.size > 0
            got = row_critical_statistics(
                block,
                ns,
                closed_form="closed_form" in pending,
                random_ranks=[block.random_ranks(rng, drawn) for _ in range(settings["mc_draws"])]
                if mc
                else (),
                random_rows=drawn,
            )
            if "monte_carlo" in pending and not mc:
                got["monte_carlo"] = np.full_like(got["distance"], np.nan)
            return {f"{name}@{n}": got[name][j] for name in got for j, n in enumerate(ns)}

        pooled = pool_chunks(
            samples,
            row_means(samples, per_row, masked=settings["masked"], chunks=settings["chunks"]),
        )
        log.info("  evaluated N=%s for %s (%s)", ns, pending, timer)
        return {
            name: np.stack([pooled[f"{name}@{n}"] for n in ns]) for name in ("distance", *pending)
        }

    heads = len(np.unique(np.stack([samples.layer, samples.head]), axis=1)[0])
    searches = search_in_batches(
        grid,
        evaluate,
        ("closed_form", "monte_carlo"),
        alpha=p.ks_alpha,
        batch=CRITICAL_N_BATCH,
    )
    rows = [
        {
            "L": L,
            "expectation": kind,
            "N": n,
            "p_value": pv,
            "N_crit": search.critical_n if search.critical_n != -1 else None,
            "evaluations": len(search.tried),
            "ks_samples": heads,  # per-head means on each side
            "ks_min_pvalue": ks_min_pvalue(heads, heads),
        }
        for kind, search in searches.items()
        for n, pv in search.tried
    ]
    for kind, search in searches.items():
        log.info(
            "%s: N_crit=%s (Algorithm 3, N list %s; p-values %s)",
            kind,
            search.critical_n,
            grid,
            [round(pv, 4) for _, pv in search.tried],
        )
    write_table(pl.DataFrame(rows, schema_overrides={"N_crit": pl.Int64}), snakemake.output[0])
    log.info("done in %s", timer)
else:
    # The products every evaluation shares, kept within analysis.critical_n.cache_mb: past it,
    # a block is prepared again at each N (same values), so memory does not grow with the corpus.
    distances = BlockedDistances.within(
        list(blocks(S, L, samples.x.shape[2])),
        lambda sl: dist.weighted(samples.weights[sl], samples.x[sl]),
        S,
        max_bytes=p.cache_mb << 20,
    )
    log.info(
        "prepared %d blocks in %s; %d held within cache_mb %d, the rest recomputed at each N",
        len(distances.prepared),
        timer,
        distances.held_blocks,
        p.cache_mb,
    )

    def expectation(kind: str, n: int) -> np.ndarray:
        if kind == "closed_form":
            out = distances.closed_form(n)
        else:
            # One generator per N, so a value does not depend on the order the search visits N.
            out = distances.monte_carlo(
                n, p.mc_draws, stream_rng(p.seed, Stream.CRITICAL_N_MONTE_CARLO, L, n)
            )
        log.info("  computed d~ and %s at N=%d (%s)", kind, n, timer)
        return out

    rows = []
    for kind in ("closed_form", "monte_carlo"):
        result = critical_n_search(
            lambda n, k=kind: ks_test(distances.distance(n), expectation(k, n)), L - 1, p.ks_alpha
        )
        log.info(
            "%s: N_crit=%s after %d evaluations %s",
            kind,
            result.n_crit,
            len(result.evaluations),
            result.evaluations,
        )
        for n, pv in result.evaluations:
            rows.append(
                {
                    "L": L,
                    "expectation": kind,
                    "N": n,
                    "p_value": pv,
                    "N_crit": result.n_crit,
                    "evaluations": len(result.evaluations),
                    "ks_samples": S,
                    "ks_min_pvalue": ks_min_pvalue(S, S),
                }
            )
    write_table(pl.DataFrame(rows, schema_overrides={"N_crit": pl.Int64}), snakemake.output[0])
    log.info("done in %s", timer)
