"""The normalizer study's runs (one per rule and seed: study-<rule>-seed<seed>) and the study
section's cross-key rules."""

from __future__ import annotations

from typing import Any

from .config_schema import MODEL_SECTIONS, MODEL_SOURCES, deep_merge

STUDY_PREFIX = "study-"


def study_model_name(name: str, seed: int, untrained: bool = False) -> str:
    """The model of study normalizer ``name`` trained with ``seed``: study-<name>-seed<seed>;
    ``untrained``: the same rule at that seed's initial weights, study-<name>-init<seed> (no
    longer than a trained model's name, so every rule name the schema allows fits the folder
    names' 64 characters). Keyed by the seed, so that a changed study.seeds plans only the new
    seeds' models."""
    return f"{STUDY_PREFIX}{name}-{'init' if untrained else 'seed'}{int(seed)}"


def untrained_seeds(study: dict[str, Any]) -> list[int]:
    """study.untrained_seeds, null read as the first of study.seeds (none without seeds)."""
    chosen = study.get("untrained_seeds")
    if chosen is None:
        return list((study.get("seeds") or [])[:1])
    return [int(s) for s in chosen]


def study_normalizer(rule: dict[str, Any]) -> dict[str, Any]:
    """The beyond.normalizers entry (attnlimits.normalizers) that is a trained model's own
    attention on its dumped logits (q k^T times the scaling): the rule with its settings, except
    its learned parameters' initialisers (Scalable-Softmax's s_init): the normalizer job reads
    the learned values from the model's learned.json."""
    from attnlimits.rules import what_if_entry

    return what_if_entry(rule)


def study_effective_set(section: dict[str, Any], study: dict[str, Any]) -> dict[str, Any]:
    """A study model's effective_set section: N* at every evaluation context, on the study's
    held-out windows (rule study_effective_windows), with study.effective_set's targets and
    variants. Not `enabled`: the study report, not `all`, asks for its jobs."""
    n_star = study.get("effective_set") or {}
    return {
        **section,
        "enabled": False,
        "lengths": sorted(study["evaluation"]["contexts"]),
        **{k: n_star[k] for k in ("targets", "variants") if k in n_star},
    }


def study_runs(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, dict]:
    """One run per study normalizer, named study-<normalizer>: the run's shared keys (corpus,
    seed, figures), the *default* chunking, extraction, analysis and beyond sections with
    study.diagnostics laid over them (so a paper run's own settings never reach, or break, the
    study), a model trained by the workflow (model.trained names the normalizer) and, as its only
    normalizer job, its own rule (study_normalizer)."""
    study = config.get("study") or {}
    shared = {k: v for k, v in config.items() if k not in ("models", "default_model")}
    # the study trains on the run's shared corpus: only the model's own sections are the defaults'
    own = [k for k in MODEL_SECTIONS if k not in ("model", "corpus") and k in defaults]
    base = {**shared, **{k: defaults[k] for k in own}}
    runs = {}
    # each seed's trained models, then the untrained ones (study.untrained_seeds): the same rule,
    # architecture and initial weights, no training step
    plan = [(seed, False) for seed in study.get("seeds") or []]
    plan += [(seed, True) for seed in untrained_seeds(study)]
    for seed, untrained in plan:
        for name, rule in (study.get("normalizers") or {}).items():
            label = study_model_name(name, seed, untrained)
            cfg = deep_merge(base, study["diagnostics"])
            cfg["model"] = {
                **defaults["model"],
                **{key: None for key in MODEL_SOURCES},
                "random_init": False,
                "config_overrides": {},
                "name": label,
                "trained": name,
                # the training seed: initial weights and batches, shared by the seed's models
                "study_seed": int(seed),
                "untrained": untrained,
            }
            cfg["beyond"] = {**cfg["beyond"], "normalizers": {name: study_normalizer(rule)}}
            cfg["effective_set"] = study_effective_set(cfg["effective_set"], study)
            runs[label] = cfg
    return runs


def study_errors(config: dict[str, Any]) -> list[str]:
    """The study's cross-key rules: known attention rules and their settings, the baseline, the
    evaluation contexts within the model's positions, training windows within them."""
    from attnlimits.rules import trained_settings

    study = config.get("study") or {}
    rules = study.get("normalizers") or {}
    errs = []
    for name, rule in rules.items():
        try:
            trained_settings(rule)
        except ValueError as exc:
            errs.append(f"study.normalizers.{name}: {exc}")
    for i, seed in enumerate(untrained_seeds(study)):
        if seed not in (study.get("seeds") or []):
            errs.append(
                f"study.untrained_seeds[{i}]: {seed} is not one of study.seeds "
                f"{study.get('seeds')}: an untrained model is compared with the trained model of "
                "its own seed (the same initial weights)"
            )
    if rules and study.get("baseline") not in rules:
        errs.append(f"study.baseline: {study.get('baseline')!r} is not one of study.normalizers")
    positions = study["architecture"]["max_positions"]
    for i, c in enumerate(study["evaluation"]["contexts"]):
        if c > positions:
            errs.append(
                f"study.evaluation.contexts[{i}]: {c} exceeds study.architecture.max_positions="
                f"{positions}"
            )
    contexts = sorted(study["evaluation"]["contexts"])
    if contexts and contexts[0] != study["training"]["context"]:
        # the length measure reads the first context as the training one
        errs.append(
            f"study.evaluation.contexts: the smallest, {contexts[0]}, must be "
            f"study.training.context={study['training']['context']} (length generalisation "
            "compares the longer contexts with it)"
        )
    if study.get("relax_ratio", 2.0) <= 1.0:
        errs.append(f"study.relax_ratio: {study['relax_ratio']} must be above 1")
    if study["training"]["context"] > positions:
        errs.append(
            f"study.training.context: {study['training']['context']} exceeds "
            f"study.architecture.max_positions={positions}"
        )
    n_star = study.get("effective_set") or {}
    if contexts and n_star.get("targets", 0) >= contexts[0]:
        errs.append(
            f"study.effective_set.targets: {n_star['targets']} scored tokens need every context "
            f"above it; the smallest of study.evaluation.contexts is {contexts[0]}"
        )
    from .effective_set import parse_variant

    for variant in n_star.get("variants") or []:
        try:
            parse_variant(variant)
        except ValueError as exc:
            errs.append(f"study.effective_set.variants: {exc}")
    arch = study["architecture"]
    if arch["heads"] % arch["kv_heads"] or arch["hidden_size"] % arch["heads"]:
        errs.append(
            "study.architecture: heads must divide hidden_size and be a multiple of kv_heads"
        )
    return errs
