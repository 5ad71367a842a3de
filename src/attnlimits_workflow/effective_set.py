"""N*, the effective attention set size, per model: the intervened forward passes of one (L,
variant) job and the summary of a model's jobs (attnlimits.effective_set has the intervention and
the search; docs/effective-set.md the protocol and its choices).

A variant is ``<selection>-<mode>`` (attention-delete, contribution-delete, random-delete,
attention-renormalize, ...). Every L reads the same chunks, cut to their last L tokens (nested
suffixes of each chunk), and scores the same final ``targets`` tokens of each chunk.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnlimits.effective_search import MODES, SELECTIONS, bootstrap_n_star

if TYPE_CHECKING:
    import polars as pl

VARIANT_SEPARATOR = "-"
# A bootstrap over fewer chunks has too few distinct resamples (35 for 4 chunks) for a 95 %
# interval to mean much: below this the interval is withheld.
MIN_CHUNKS_FOR_INTERVAL = 8


def parse_variant(variant: str) -> tuple[str, str]:
    """'attention-delete' -> ('attention', 'delete'); refuses unknown selections and modes."""
    selection, _, mode = variant.partition(VARIANT_SEPARATOR)
    if selection not in SELECTIONS or mode not in MODES:
        raise ValueError(
            f"effective_set variant {variant!r} is not <selection>-<mode> with a selection of "
            f"{SELECTIONS} and a mode of {MODES}"
        )
    return selection, mode


def config_errors(section: dict[str, Any], chunk_length: int) -> list[str]:
    """effective_set's cross-key rules: known variants, targets below every L, L within a chunk
    (the last two where ``enabled``: otherwise the job, if asked for by name, says so)."""
    errs = []
    for variant in section["variants"]:
        try:
            parse_variant(variant)
        except ValueError as exc:
            errs.append(str(exc))
    lengths = sorted(section["lengths"]) if section["enabled"] else []
    if lengths and section["targets"] >= lengths[0]:
        errs.append(
            f"effective_set.targets: {section['targets']} scored tokens need every L above it; "
            f"the smallest of effective_set.lengths is {lengths[0]}"
        )
    if lengths and lengths[-1] > chunk_length:
        errs.append(
            f"effective_set.lengths: L = {lengths[-1]} exceeds chunking.chunk_length "
            f"({chunk_length}); each L is a suffix of one chunk"
        )
    return errs


def load_causal_lm(model_dir: str | Path, device: str = "cpu"):
    """A model folder as a causal LM whose attention is the intervention's
    (attnlimits.effective_set.register_intervention), in float32. Encoders are refused (no
    next-token loss). A folder without an LM head: its tied input embeddings, or, for a model
    with seeded random weights, a head drawn from the manifest's seed; otherwise refused."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from attnlimits.effective_set import register_intervention
    from attnlimits.families import family

    from .models import ModelSourceError, check_model_folder, read_manifest
    from .training import load_trained

    check_model_folder(model_dir, f"delete {model_dir} and rerun to fetch (or train) it again")
    settings = json.loads((Path(model_dir) / "config.json").read_text())
    if not family(settings.get("model_type")).causal:
        raise ModelSourceError(
            f"{model_dir}: N* needs a causal LM's next-token loss; "
            f"{settings.get('model_type')} is an encoder"
        )
    if settings.get("attnlimits_attention"):  # the normalizer study's own models
        return load_trained(model_dir, register_intervention(), causal_lm=True).to(device).eval()
    config = AutoConfig.from_pretrained(model_dir)
    model, info = AutoModelForCausalLM.from_pretrained(
        model_dir,
        attn_implementation=register_intervention(),
        dtype=torch.float32,
        output_loading_info=True,
    )
    head = model.get_output_embeddings()
    missing = [k for k in info["missing_keys"] if k.endswith("weight") and "head" in k]
    if missing and not getattr(config, "tie_word_embeddings", False):
        manifest = read_manifest(model_dir)
        if manifest.get("source") != "random_init":
            raise ModelSourceError(
                f"{model_dir}: the folder holds no LM head ({missing}) and the model does not tie "
                "it to its embeddings, so its next-token loss is unknown"
            )
        # a random-init model's head: seeded like its other weights
        generator = torch.Generator().manual_seed(int(manifest["seed"]))
        std = float(getattr(config, "initializer_range", 0.02))
        with torch.no_grad():
            head.weight.copy_(torch.randn(head.weight.shape, generator=generator) * std)
    return model.to(device).eval()


def chunk_seed(seed: int, length: int, chunk: int) -> int:
    """The random selection's seed of one chunk's forward at L: its own stream, the same at every
    N (so that N's curve is not also a curve of fresh draws) and whatever ran before it."""
    return int(np.random.SeedSequence([seed, length, chunk]).generate_state(1)[0])


def chunk_nll(model, ids: np.ndarray, targets: int, intervention=None) -> np.ndarray:
    """Per chunk (row of ``ids``), the total next-token NLL (nats, float64) of its last
    ``targets`` tokens, each predicted from the tokens before it in the row, under
    ``intervention`` (an attnlimits.effective_set.Intervention; None: the plain model), its
    random selection seeded per chunk by :func:`chunk_seed` from ``intervention.seed``."""
    import dataclasses

    import torch

    from attnlimits.effective_set import intervene

    device = next(model.parameters()).device
    out = np.empty(ids.shape[0])
    for c in range(ids.shape[0]):
        spec = intervention
        if spec is not None:
            spec = dataclasses.replace(spec, seed=chunk_seed(spec.seed, ids.shape[1], c))
        with torch.inference_mode(), intervene(spec):
            row = torch.from_numpy(np.array(ids[c], dtype=np.int64))[None].to(device)
            # the last targets + 1 positions' logits: the first targets of them predict the
            # scored tokens
            logits = model(input_ids=row, use_cache=False, logits_to_keep=targets + 1).logits
            losses = torch.nn.functional.cross_entropy(
                logits[0, :-1].double(), row[0, -targets:], reduction="sum"
            )
            out[c] = losses.item()
    return out


def run_variant(
    model,
    tokens: np.ndarray,
    length: int,
    variant: str,
    section: dict[str, Any],
    seed: int,
    log: logging.Logger,
) -> pl.DataFrame:
    """One (L, variant) job's table: the plain model's and every searched N's per-chunk NLL over
    the same targets (columns length, variant, n, chunk, nll, base_nll, targets), N searched by
    :func:`attnlimits.effective_search.search_n_star` on the chunks' pooled dNLL_rel."""
    import time

    import polars as pl

    from attnlimits.effective_search import relative_nll_increase, search_n_star
    from attnlimits.effective_set import Intervention

    selection, mode = parse_variant(variant)
    targets = int(section["targets"])
    if not targets < length <= tokens.shape[1]:
        raise ValueError(
            f"effective_set: L = {length} must exceed effective_set.targets ({targets}) and fit "
            f"in a chunk ({tokens.shape[1]} tokens: chunking.chunk_length)"
        )
    ids = tokens[:, -length:]
    t0 = time.perf_counter()
    base = chunk_nll(model, ids, targets, None)
    log.info(
        "L=%d %s: the plain model's NLL %.4f nats per target (%d chunks, %.1fs)",
        length,
        variant,
        base.sum() / (targets * len(base)),
        len(base),
        time.perf_counter() - t0,
    )
    per_chunk: dict[int, np.ndarray] = {}

    def dnll(n: int) -> float:
        t = time.perf_counter()
        intervention = Intervention(n, selection, mode, seed=seed, block=int(section["block"]))
        per_chunk[n] = chunk_nll(model, ids, targets, intervention)
        value = float(relative_nll_increase(per_chunk[n].sum(), base.sum()))
        log.info(
            "L=%d %s: N=%d dNLL_rel %.5f (%.1fs)",
            length,
            variant,
            n,
            value,
            time.perf_counter() - t,
        )
        return value

    limit = min(length, section["max_n"] or length)
    search = search_n_star(dnll, float(section["tau"]), limit, refine=bool(section["refine"]))
    log.info(
        "L=%d %s: N* = %s after %d intervened passes",
        length,
        variant,
        search.n_star if search.n_star else f"> {limit} (censored)",
        len(search.evaluated),
    )
    ns = sorted(per_chunk)
    chunks = np.arange(len(base))
    return pl.DataFrame(
        {
            "length": np.full(len(ns) * len(base), length, dtype=np.int64),
            "variant": [variant] * (len(ns) * len(base)),
            "n": np.repeat(np.asarray(ns, dtype=np.int64), len(base)),
            "chunk": np.tile(chunks, len(ns)),
            "nll": np.concatenate([per_chunk[n] for n in ns]) if ns else np.empty(0),
            "base_nll": np.tile(base, len(ns)),
            "targets": np.full(len(ns) * len(base), targets, dtype=np.int64),
        }
    )


def summarise(
    tables: Sequence[pl.DataFrame],
    tau: float,
    resamples: int,
    level: float,
    seed: int,
    max_n: int | None = None,
) -> pl.DataFrame:
    """N* per (L, variant), with a paired-chunk bootstrap interval, the search's evaluations,
    dNLL_rel at N*, and N*/L. A censored N* (no evaluated N passes) has n_star null and
    lower_bound the largest evaluated N + 1. ``n_star_floor``: the least N* the evaluations
    allow (the last failing N below N*, plus one): N* itself after the refinement, the low end
    of a power of two's cell without it (effective_set.refine false).

    A resample's N* is known only to its cell: above its last failing evaluated N, at most its
    first passing one (outside the search's refined bracket, up to the next power of two). The
    interval reads the cells' floors for its low end and their tops for its high end, so it is
    conservative both ways. Withheld (null)
    below MIN_CHUNKS_FOR_INTERVAL chunks. Where the search may reach L (``max_n`` None or >= L), N = L is in every resample's
    curve at dNLL_rel 0 (the model keeps every key there: the plain forward, bit for bit), so a
    resample that passes at no evaluated N below has N* at most L."""
    import polars as pl

    rows = []
    for table in tables:
        for (length, variant), part in table.group_by(["length", "variant"], maintain_order=True):
            base = part.filter(pl.col("n") == part["n"].min()).sort("chunk")["base_nll"].to_numpy()
            nll = {
                int(n): g.sort("chunk")["nll"].to_numpy()
                for (n,), g in part.group_by(["n"], maintain_order=True)
            }
            curve = {n: float((v.sum() - base.sum()) / base.sum()) for n, v in nll.items()}
            passing = [n for n, v in curve.items() if v <= tau]
            n_star = min(passing) if passing else None
            evaluated = len(nll)
            if max_n is None or max_n >= length:
                nll.setdefault(int(length), base)
            rng = np.random.default_rng([seed, int(length)])
            first, _ = bootstrap_n_star(nll, base, tau, resamples, rng)
            tail = (1.0 - level) / 2.0
            finite = first[np.isfinite(first)]
            censored_share = 1.0 - finite.size / max(first.size, 1)
            lo = hi = None
            if (
                n_star is not None
                and censored_share <= tail
                and len(base) >= MIN_CHUNKS_FOR_INTERVAL
            ):
                # a resample with no passing N has N* above every evaluated N: +inf
                draws = np.where(np.isfinite(first), first, np.inf)
                # its first passing evaluated N is the top of a cell (the evaluated N below it,
                # that N]: the low end reads the cells' floors, the high end their tops
                evaluated_n = np.array(sorted(nll), dtype=np.float64)
                below = np.searchsorted(evaluated_n, np.where(np.isfinite(first), first, 0.0))
                floors = np.where(
                    np.isfinite(first),
                    np.where(below > 0, evaluated_n[np.maximum(below - 1, 0)] + 1.0, 1.0),
                    np.inf,
                )
                lo = float(np.quantile(floors, tail, method="lower"))
                hi = float(np.quantile(draws, 1.0 - tail, method="higher"))
                if not np.isfinite(hi):
                    # exactly the tail's share censored: the high end is above every N tried
                    lo = hi = None
            rows.append(
                {
                    "length": int(length),
                    "variant": variant,
                    "n_star": n_star,
                    "censored": n_star is None,
                    "lower_bound": (max(curve) + 1) if n_star is None else None,
                    "n_star_low": lo,
                    "n_star_high": hi,
                    # the least N* the evaluations allow: the last failing N below it, plus one
                    # (N* itself after the refinement; a power of two's cell without it)
                    "n_star_floor": None
                    if n_star is None
                    else max((n for n in curve if n < n_star), default=0) + 1,
                    "n_star_over_length": None if n_star is None else n_star / int(length),
                    "dnll_at_n_star": None if n_star is None else curve[n_star],
                    "evaluations": evaluated,
                    "chunks": len(base),
                    "base_nll_per_target": float(base.sum() / (part["targets"][0] * len(base))),
                }
            )
    return pl.DataFrame(rows).sort(["variant", "length"])
