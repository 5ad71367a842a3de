"""Lemma 2 on a study model's own rule: the exact ||d rule(z / T) / d z||_2 at every temperature T
of analysis.gradient.temperatures, on the analysed rows at analysis.gradient.length (the same
seeded samples as its normalizer job), with the rule's known bound per row and its check."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from attnlimits import rules
from attnlimits.checks import NOT_TESTABLE, RTOL_FLOAT64, VIOLATED, check_bound
from attnlimits.rules import jacobian_bound
from attnlimits_workflow.jobs import Timer, sample_keys
from attnlimits_workflow.packs import Pack
from attnlimits_workflow.training import normalizer_arguments

from .common import constant_columns
from .normalizer import kept_samples

LOG = logging.getLogger("study_gradient")


@dataclass(frozen=True)
class Settings:
    """The study rule, its normalizer entry (beyond.normalizers.<trained>),
    analysis.gradient.temperatures, beyond.max_samples, seed."""

    rule: Mapping[str, Any]
    entry: Mapping[str, Any]
    temperatures: Sequence[float]
    max_samples: int
    seed: int


def analyse(
    pack: Pack,
    settings: Settings,
    learned: Mapping[str, Any],
    source: str = "",
    log: logging.Logger = LOG,
) -> pl.DataFrame:
    """Per analysed row and temperature: the rule's exact Jacobian norm, its bound (NaN where
    none is known) and whether the row violates it or is not testable. ``learned``: the trained
    model's per-head parameters (read from ``source``)."""
    timer = Timer()
    rule, entry = dict(settings.rule), dict(settings.entry)
    normalizer = rules.get(entry["kind"])
    L = pack.length
    keep = kept_samples(pack, settings.seed, settings.max_samples)
    keys = {k: v[keep] for k, v in sample_keys(pack).items()}
    logits = np.asarray(pack.logits[keep], dtype=np.float64)
    arguments = normalizer_arguments(entry, learned, keys["layer"], keys["head"])
    missing = [q.name for q in normalizer.learned if q.name not in arguments]
    if missing:
        raise SystemExit(f"{source}: no learned {rule['kind']} {missing} (learned.json)")
    log.info(
        "rule %s, L=%d, %d rows, %d temperatures", rule, L, len(keep), len(settings.temperatures)
    )
    frames = []
    for T in sorted(float(t) for t in settings.temperatures):
        # chain rule: d rule(z/T)/dz = J_rule(z/T) / T
        norm = normalizer.jacobian_norm(logits / T, L, **arguments) / T
        bound = jacobian_bound(
            entry["kind"], T, L, arguments
        )  # every key of a row is visible: n = L
        bound_rows = np.broadcast_to(np.nan if bound is None else bound, norm.shape)
        bound_rows = bound_rows.astype(np.float64)
        check = check_bound(norm, bound_rows, upper=True, rtol=RTOL_FLOAT64)
        violated = check == VIOLATED
        frames.append(
            pl.DataFrame(
                {
                    **keys,
                    **constant_columns(len(keep), L=L),
                    "T": np.full(len(keep), T),
                    "jacobian_norm": norm,
                    "bound": bound_rows,
                    "violated": violated,
                    "not_testable": check == NOT_TESTABLE,
                }
            )
        )
        log.info(
            "T=%g: median ||J|| %.4g, max %.4g, bound %s, %d violations (%s)",
            T,
            np.median(norm),
            norm.max(),
            "none known" if bound is None else f"max {np.max(bound_rows):.4g}",
            int(violated.sum()),
            timer,
        )
    return pl.concat(frames)
