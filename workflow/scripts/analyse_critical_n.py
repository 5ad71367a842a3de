"""Critical top-N at one L: smallest N where a KS test cannot tell d~ from the expected distance
(both the paper's closed-form term and the Monte-Carlo expectation), by a safeguarded
regula falsi on the KS statistic (attnlimits.critical.critical_n_search)."""

import numpy as np
import polars as pl

from attnlimits import distance as dist
from attnlimits.critical import BlockedDistances, critical_n_search, ks_test
from attnlimits_workflow.jobs import Timer, blocks, job_logger, write_table
from attnlimits_workflow.packs import read_pack

log = job_logger(snakemake, "critical_n")
timer = Timer()
L = int(snakemake.wildcards.length)
p = snakemake.params
samples = read_pack(snakemake.input.pack)
S = samples.weights.shape[0]
log.info("L=%d: %d samples loaded in %s", L, S, timer)
if p.protocol == "all_rows":
    # Algorithm 3: for N in an increasing list, KS between the per-head means (over every row)
    # of d~ and of E; N_crit is the first N the test does not reject. The closed form (the
    # paper's) and the Monte-Carlo E (ours) are searched side by side on the same rows.
    from attnlimits.critical import ks_test
    from attnlimits.protocol import critical_n_list, row_monte_carlo, row_statistics
    from attnlimits_workflow.rows import pool_chunks, row_means

    settings = p.all_rows
    grid = critical_n_list(L, settings["critical_n_fractions"])
    found: dict[str, int | None] = {"closed_form": None, "monte_carlo": None}
    tried: dict[str, list] = {"closed_form": [], "monte_carlo": []}
    for n in grid:
        rng = np.random.default_rng([p.seed, 2, L, n])

        def per_row(block, logits, rows, sample, n=n, rng=rng):
            out = row_statistics(block, n=n, upper_bound=False)  # d~ and E only
            draws = row_monte_carlo(block, n=n, draws=settings["mc_draws"], rng=rng)
            return {
                "distance": out["distance"],
                "closed_form": out["expectation_term"],
                "monte_carlo": draws.mean(axis=0),
            }

        pooled = pool_chunks(
            samples,
            row_means(samples, per_row, masked=settings["masked"], chunks=settings["chunks"]),
        )
        for kind in found:
            if found[kind] is None:
                pv = ks_test(pooled["distance"], pooled[kind]).pvalue
                tried[kind].append((n, pv))
                if pv >= p.ks_alpha:
                    found[kind] = n
        log.info("  N=%d: %s (%s)", n, {k: v[-1][1] for k, v in tried.items()}, timer)
        if all(v is not None for v in found.values()):
            break
    rows = [
        {
            "L": L,
            "expectation": kind,
            "N": n,
            "p_value": pv,
            "N_crit": found[kind],
            "evaluations": len(tried[kind]),
        }
        for kind in found
        for n, pv in tried[kind]
    ]
    for kind in found:
        log.info("%s: N_crit=%s (Algorithm 3, N list %s)", kind, found[kind], grid)
    write_table(pl.DataFrame(rows, schema_overrides={"N_crit": pl.Int64}), snakemake.output[0])
    log.info("done in %s", timer)
else:
    # The products every evaluation shares, computed once per block of samples.
    distances = BlockedDistances(
        [
            (sl, dist.weighted(samples.weights[sl], samples.x[sl]))
            for sl in blocks(S, L, samples.x.shape[2])
        ],
        S,
    )
    log.info("prepared %d blocks in %s", len(distances.prepared), timer)

    def expectation(kind: str, n: int) -> np.ndarray:
        if kind == "closed_form":
            out = distances.closed_form(n)
        else:
            # One generator per N, so a value does not depend on the order the search visits N.
            out = distances.monte_carlo(n, p.mc_draws, np.random.default_rng([p.seed, 2, L, n]))
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
                }
            )
    write_table(pl.DataFrame(rows, schema_overrides={"N_crit": pl.Int64}), snakemake.output[0])
    log.info("done in %s", timer)
