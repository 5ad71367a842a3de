"""The row engine: every all-rows analysis at one L in one pass over each head's rows.

Under the paper's protocol each analysis reads the same rows: the attention of every query row
of every head, recomputed from the pack's q and k. One job per (model, L) (rule ``rows``)
computes each block of rows once, its weights once, and hands the block to every analysis the
configuration asks for at that L: distance at each of its N, separability at each of its N, the
critical-N search (every N of its list), the gradient at each T. Each analysis says which
values it needs at L (:data:`ROW_ANALYSES`), its row kernels (what it reads of a block,
attnlimits_workflow.rows.RowKernel) and its tables from the kernels' per-head means. The tables
are those the analysis's own job writes (the same values: a kernel's statistics do not depend on
which others share the pass), named for the rules that take them out of the job's folder.

Adding an analysis that reads rows: its module's ``engine_kernels`` and ``engine_tables`` (a
row kernel and a table from its per-head means), and ``row_values`` in its record of
attnlimits_workflow.registry, its values at L (docs/extending.md).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

# The analyses the row engine serves, from the registry: name -> its values at L from the model's
# analysis section. The module attnlimits_workflow.analyses.<name> holds the rest: Settings,
# engine_kernels(pack, settings, values, inputs) -> key -> RowKernel, and engine_tables(pack,
# settings, values, pooled, log, timer) -> file stem -> table from each key's per-head means.
from attnlimits_workflow.registry import ROW_ANALYSES

LOG = logging.getLogger("rows")
# the analysis section's keys every all-rows analysis's settings may read
SHARED_KEYS = ("protocol", "all_rows", "embedding", "zero_weight", "bootstrap")
# an analysis's own keys that say where it runs: its values at L stand for them in the plan
GRID_KEYS = ("n_fixed", "length_fixed", "n_grid", "length", "temperatures")
# settings that only the tables read (the critical-N test and its bootstrap) or only the
# last-row protocol reads: the parts' passes never do, so they leave them out of their params
# (kernel_plan) and a change reruns the pooling job alone
TABLE_KEYS = ("bootstrap", "ks_alpha", "samples", "cache_mb")
LAST_ROW_KEYS = ("mc_draws", "mc_strata", "mc_max_draws", "mc_target_rel_stderr", "directions")


@dataclass(frozen=True)
class Inputs:
    """What a job has besides the pack: Theorem 2's delta per sample (separability)."""

    delta: np.ndarray | None = None


def kernel_plan(planned: Mapping[str, Any]) -> dict[str, Any]:
    """``planned`` with the settings no row kernel reads set to None (TABLE_KEYS,
    LAST_ROW_KEYS): the params of a part's pass, so that changing them reruns no pass."""
    return {
        name: {
            **own,
            "settings": {
                k: (None if k in TABLE_KEYS + LAST_ROW_KEYS else v)
                for k, v in own["settings"].items()
            },
        }
        for name, own in planned.items()
    }


def plan(
    section: Mapping[str, Any], seed: int, length: int, analyses: Collection[str] | None = None
) -> dict[str, Any]:
    """What the row engine computes at L for a model's analysis section: per analysis with
    values there, its settings (the section's shared keys and its own) and its values. The
    rule's params: a setting that no analysis at L reads is not in it, so changing it reruns
    no engine job of that L. ``analyses``: only these (a reading's run computes only the
    analyses whose tables it does not take from its source run); None: all."""
    out = {}
    for name, values_at in ROW_ANALYSES.items():
        if analyses is not None and name not in analyses:
            continue
        values = values_at(section, length)
        if values:
            own = {k: section[k] for k in SHARED_KEYS if k in section}
            mine = {k: v for k, v in section.get(name, {}).items() if k not in GRID_KEYS}
            out[name] = {
                "settings": {"seed": seed, **own, **mine},
                "values": values,
            }
    return out


def analysis_module(name: str):
    """attnlimits_workflow.analyses.<name> (imported only by the jobs: planning reads
    :func:`plan` alone, with no analysis code)."""
    return importlib.import_module(f"attnlimits_workflow.analyses.{name}")


def _settings(planned: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """name -> (module, settings) of every planned analysis, in the registry's order."""
    from attnlimits_workflow.analyses.common import settings_from

    out = {}
    for name in ROW_ANALYSES:
        if name in planned:
            module = analysis_module(name)
            own = planned[name]["settings"]
            out[name] = (module, settings_from(module.Settings, SimpleNamespace(**own)))
    return out


def layers_of_part(pack, part: int, parts: int) -> list[int]:
    """The layers of part ``part`` of ``parts`` (every parts-th layer of the pack, from the
    part-th; none where the pack has fewer layers than parts)."""
    return sorted(int(layer) for layer in np.unique(pack.layer))[part::parts]


def run_part(
    pack,
    planned: Mapping[str, Any],
    inputs: Inputs = Inputs(),
    log: logging.Logger = LOG,
    part: int = 0,
    parts: int = 1,
) -> dict[str, dict[str, np.ndarray]]:
    """One pass over each head's rows of the layers of part ``part`` of ``parts``
    (:func:`layers_of_part`) for every planned analysis's kernels: "<analysis>/<key>" -> the
    kernel's per-sample means (attnlimits_workflow.rows.row_means_of), which :func:`tables`
    pools with the other parts'."""
    from attnlimits_workflow.analyses.common import engine_settings
    from attnlimits_workflow.jobs import Timer
    from attnlimits_workflow.rows import RowKernel, row_means_of

    timer = Timer()
    modules = _settings(planned)
    kernels: dict[str, RowKernel] = {}
    for name, (module, settings) in modules.items():
        own = module.engine_kernels(pack, settings, planned[name]["values"], inputs)
        kernels |= {f"{name}/{key}": kernel for key, kernel in own.items()}
    # the pass reads the same rows for every kernel, so the settings that choose them agree (the
    # section's, shared by every analysis); zero_weight shapes the blocks, which the gradient's
    # logits-only kernels do not read
    every = [settings for _, settings in modules.values()]
    rule = {s.zero_weight for s in every if hasattr(s, "zero_weight")}
    passes = [{k: v for k, v in engine_settings(s).items() if k != "zero_weight"} for s in every]
    if any(p != passes[0] for p in passes) or len(rule) > 1:
        raise ValueError(f"the analyses at L={pack.length} disagree on the rows to read: {passes}")
    shared = passes[0] | {"zero_weight": next(iter(rule), "not_selected")}
    layers = layers_of_part(pack, part, parts)
    log.info(
        "L=%d, part %d of %d (layers %s): %d kernels of %s, one pass over each head's rows",
        pack.length,
        part + 1,
        parts,
        layers,
        len(kernels),
        list(modules),
    )
    means = row_means_of(
        pack,
        kernels,
        progress=lambda i, k: log.info("  %d/%d heads (%s)", i, k, timer),
        layers=layers,
        **shared,
    )
    log.info("pass done in %s", timer)
    return means


def merge_parts(parts: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """The parts' per-sample means as one pass over every layer gives them: each kernel's
    arrays joined and put in the pack's sample order (so the pooling sums in the same order)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for kernel in parts[0]:
        samples = np.concatenate([p[kernel]["__samples"] for p in parts])
        order = np.argsort(samples, kind="stable")
        names = {name for p in parts for name in p[kernel]}
        out[kernel] = {}
        for name in names:
            # a part with no sample of a kernel's samples has none of its statistics either
            values = [p[kernel][name] for p in parts if name in p[kernel]]
            out[kernel][name] = np.concatenate(values)[order]
    return out


def tables(
    pack,
    planned: Mapping[str, Any],
    means: Mapping[str, dict[str, np.ndarray]],
    log: logging.Logger = LOG,
) -> dict[str, Any]:
    """Every planned analysis's tables at the pack's L (file stem -> polars table) from its
    kernels' per-sample means over every layer."""
    from attnlimits_workflow.jobs import Timer
    from attnlimits_workflow.rows import pool_chunks

    timer = Timer()
    out: dict[str, Any] = {}
    for name, (module, settings) in _settings(planned).items():
        pooled = {
            key.split("/", 1)[1]: pool_chunks(pack, own)
            for key, own in means.items()
            if key.split("/", 1)[0] == name
        }
        out |= module.engine_tables(pack, settings, planned[name]["values"], pooled, log, timer)
    log.info("%d tables in %s", len(out), timer)
    return out


def run(
    pack,
    planned: Mapping[str, Any],
    inputs: Inputs = Inputs(),
    log: logging.Logger = LOG,
) -> dict[str, Any]:
    """Every planned analysis's tables at the pack's L (file stem -> polars table), from one
    pass over each head's rows of every layer."""
    return tables(pack, planned, run_part(pack, planned, inputs, log), log)


def _inputs(snakemake: Any, pack, planned) -> Inputs:
    """Theorem 2's delta per sample where separability runs at the job's L."""
    if "separability" not in planned:
        return Inputs()
    import polars as pl

    from attnlimits_workflow.analyses import separability

    source = snakemake.input.get("separation")
    context = planned["separability"]["settings"]["delta_over"] == "context"
    separation = pl.read_parquet(source) if context else None
    return Inputs(delta=separability.context_delta(pack, separation, str(source)))


def run_part_job(snakemake: Any) -> None:
    """Rule ``rows_part``: one part's per-sample means, saved for rule ``rows``."""
    from attnlimits_workflow.jobs import job_logger
    from attnlimits_workflow.packs import read_pack

    log = job_logger(snakemake, "rows")
    planned = snakemake.params.plan
    pack = read_pack(snakemake.input.pack, snakemake.params.embedding)
    means = run_part(
        pack,
        planned,
        _inputs(snakemake, pack, planned),
        log,
        part=int(snakemake.wildcards.part),
        parts=int(snakemake.params.parts),
    )
    save_part(means, snakemake.output[0])


def save_part(means: Mapping[str, Mapping[str, np.ndarray]], path: str | Path) -> None:
    """A part's per-sample means, written atomically for :func:`read_part`."""
    from attnlimits_workflow.atomic import atomic_path

    flat = {f"{kernel}\t{name}": v for kernel, own in means.items() for name, v in own.items()}
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **flat)


def read_part(path: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """A part's per-sample means as :func:`run_part_job` saved them."""
    out: dict[str, dict[str, np.ndarray]] = {}
    with np.load(path) as saved:
        for key in saved.files:
            kernel, name = key.split("\t", 1)
            out.setdefault(kernel, {})[name] = saved[key]
    return out


def run_job(snakemake: Any) -> None:
    """Rule ``rows``: every planned table at L from the parts' means, into the job's folder."""
    from attnlimits_workflow.jobs import job_logger, write_table
    from attnlimits_workflow.packs import read_pack

    log = job_logger(snakemake, "rows")
    pack = read_pack(snakemake.input.pack, snakemake.params.embedding)
    means = merge_parts([read_part(p) for p in snakemake.input.parts])
    out = Path(snakemake.output[0])
    out.mkdir(parents=True, exist_ok=True)
    for stem, table in tables(pack, snakemake.params.plan, means, log).items():
        write_table(table, out / f"{stem}.parquet")
