"""The analyses' registry: one record per analysis, the one place the workflow learns which
analyses exist and what each reads, computes, scores and draws.

Everything the rules list by analysis is derived from :data:`REGISTRY` here (the generic rules'
wildcards, Table 1's inputs and claim ids, the comparison figures, the bound checks, the
readings' reuse of summaries, the row engine's plan, the figure captions, the config checks),
so an analysis is its module ``attnlimits_workflow.analyses.<name>`` plus one record below
(docs/extending.md). Planning imports this module: it imports neither numpy nor torch, and no
analysis code."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# What a record's ``row_values`` returns: the analysis's values at one L (its N, its T, or one
# entry for one table; empty: none at that L), from the model's analysis section.
ValuesAt = Callable[[Mapping[str, Any], int], list]


def distance_ns(section: Mapping[str, Any], length: int) -> list[int]:
    """Theorem 1's N at L: analysis.distance.n_fixed at every L of analysis.lengths, and its
    n_grid at length_fixed."""
    d = section["distance"]
    ns = {d["n_fixed"]} if length in section["lengths"] else set()
    return sorted(ns | (set(d["n_grid"]) if length == d["length_fixed"] else set()))


def at_own_length(key: str, values: str) -> ValuesAt:
    """The values ``analysis.<key>.<values>`` at ``analysis.<key>.length`` alone."""

    def at(section: Mapping[str, Any], length: int) -> list:
        own = section[key]
        return sorted(own[values]) if length == own["length"] else []

    return at


def at_every_length(section: Mapping[str, Any], length: int) -> list[str]:
    """One table at every L of analysis.lengths."""
    return ["list"] if length in section["lengths"] else []


# ---------------------------------------------------------------- cross-key config rules
# Each is errors(config) -> one line per problem, starting with the key (config_sections runs
# them with the other sections' checks, before any job).
def temperature_name(t: float) -> str:
    """The T of a gradient job's file name (6 significant digits)."""
    return f"{float(t):g}"


def n_below_errors(key: str, ns: list[int], length: int) -> list[str]:
    """Each N of a grid below the L it is drawn from."""
    return [
        f"{key}[{i}]: N={n} must be < L={length} (allowed: 1..{length - 1})"
        for i, n in enumerate(ns)
        if n >= length
    ]


def in_lengths_errors(key: str, value: int, lengths: list[int]) -> list[str]:
    """An analysis's L, which must be one of analysis.lengths (its dumps are made there)."""
    if value not in lengths:
        return [f"{key}: L={value} is not in analysis.lengths {sorted(lengths)}"]
    return []


def distance_config_errors(config: dict[str, Any]) -> list[str]:
    """analysis.distance: N below every L of the scan over L, the scan over N at a dumped L."""
    lengths = sorted(config["analysis"]["lengths"])
    d = config["analysis"]["distance"]
    errs = []
    if d["n_fixed"] >= lengths[0]:
        errs.append(
            f"analysis.distance.n_fixed: N={d['n_fixed']} must be < every L in analysis.lengths (smallest {lengths[0]})"
        )
    errs += in_lengths_errors("analysis.distance.length_fixed", d["length_fixed"], lengths)
    return errs + n_below_errors("analysis.distance.n_grid", d["n_grid"], d["length_fixed"])


def separability_config_errors(config: dict[str, Any]) -> list[str]:
    """analysis.separability: the scan over N at a dumped L."""
    s = config["analysis"]["separability"]
    errs = in_lengths_errors(
        "analysis.separability.length", s["length"], config["analysis"]["lengths"]
    )
    return errs + n_below_errors("analysis.separability.n_grid", s["n_grid"], s["length"])


def gradient_config_errors(config: dict[str, Any]) -> list[str]:
    """analysis.gradient: a dumped L, and temperatures that name different jobs."""
    g = config["analysis"]["gradient"]
    errs = in_lengths_errors("analysis.gradient.length", g["length"], config["analysis"]["lengths"])
    named: dict[str, float] = {}
    for i, t in enumerate(g["temperatures"]):
        name = temperature_name(t)
        if name in named:
            errs.append(
                f"analysis.gradient.temperatures[{i}]: {t!r} and {named[name]!r} name the same job "
                f"T{name} (temperatures must differ in their first 6 significant digits)"
            )
        named.setdefault(name, t)
    return errs


@dataclass(frozen=True)
class Analysis:
    """One analysis, as the workflow serves it. Its module
    ``attnlimits_workflow.analyses.<name>`` holds the code each field below names.

    - ``reads``: the reading keys (config.READING_KEYS) its values depend on; a reading of
      analysis.readings that changes none of them reuses the source model's summary.
    - ``per_length``: its table at each L of analysis.lengths is made by the generic rule
      ``analyse`` (the module's ``run``); False: bespoke rules make its tables.
    - ``generic_summary``: rule ``summarise_analysis`` makes summary/<name>.csv (the module's
      ``summarise`` and ``REPLICATED``); False: a bespoke rule does.
    - ``bound_checks``: its summary step writes violations_<name>.csv, each check a "bound holds"
      row of Table 1.
    - ``claims``: the claim ids of workflow/resources/paper_claims.yaml (or of the module's own
      ``CLAIMS``) that its module's ``score(card, summary, replicates, scoring)`` adds to Table
      1, read from summary/<name>.csv and its bootstrap replicates.
    - ``compare``: one figure with every model side by side, figures/compare/<name>.pdf.
    - ``figure`` and ``caption``: a per-model figure figures/<model>/<figure>.pdf drawn by the
      generic rule ``analysis_figure`` (the module's ``figure``), and the report's caption.
    - ``row_values``: where the row engine serves it (the paper's protocol), its values at L;
      the module then has ``engine_kernels`` and ``engine_tables``.
    - ``config_errors``: the cross-key rules of analysis.<name> that the schema cannot say,
      ``errors(config) -> list[str]`` (one line per problem, starting with the key), run by the
      config check before any job; defined in this module, which imports no numpy.
    """

    name: str
    reads: frozenset[str] = frozenset({"embedding"})
    per_length: bool = True
    generic_summary: bool = True
    bound_checks: bool = True
    claims: tuple[str, ...] = ()
    compare: bool = False
    figure: str | None = None
    caption: str | None = None
    row_values: ValuesAt | None = None
    config_errors: Callable[[dict[str, Any]], list[str]] | None = None


# Paper Fig. 4: the report caption of gradient's figure (drawn by rule analysis_figure).
FIG4_CAPTION = """\
**Gradient sensitivity (Lemma 2, Corollary 3; paper Fig. 4).** For each temperature T and perturbation size eps, the
finite-difference sensitivity g(T, eps) = ||softmax((l + eps u)/T) - softmax(l/T)|| / eps for seeded random unit
directions u, and the exact spectral norm of the softmax Jacobian (computed without forming it), each the largest over
the heads of the per-head statistic the protocol reads: under the paper's protocol (all_rows) each head's mean over its
rows, one direction per row (Algorithm 5); under the last-row protocol each analysed row's g at the largest of its
analysis.gradient.directions directions (the same directions for every T). The figure's note below says which. The paper's bound min{1/(4T), sqrt 2} (dashed) and 1/(2T) (dotted), which always holds. Points above
the dashed line are violations of Corollary 3 as printed (docs/paper-notes.md); rows of Gaussian logits with each row's
own spread violate it too, so Table 1 decides the check against that null of matched spread, not by the count.
"""

# In Table 1's order: its rows follow this list, then every bound check in the same order.
REGISTRY: tuple[Analysis, ...] = (
    Analysis(
        "distance",
        per_length=False,
        generic_summary=False,
        claims=("linear_in_length", "plateau_in_n"),
        compare=True,
        row_values=distance_ns,
        config_errors=distance_config_errors,
    ),
    Analysis(
        "critical_n",
        # summarised with distance's tables by rule summarise_distance (Fig. 2 reads both)
        generic_summary=False,
        bound_checks=False,
        claims=("critical_n",),
        compare=True,
        row_values=at_every_length,
    ),
    Analysis(
        "separability",
        per_length=False,
        generic_summary=False,
        claims=("saturation", "upper_bound_tracks"),
        compare=True,
        row_values=at_own_length("separability", "n_grid"),
        config_errors=separability_config_errors,
    ),
    Analysis(
        "gradient",
        reads=frozenset({"temperature_on"}),
        per_length=False,
        generic_summary=False,
        claims=("gradient_inverse_t", "gradient_drop"),
        compare=True,
        figure="fig4",
        caption=FIG4_CAPTION,
        row_values=at_own_length("gradient", "temperatures"),
        config_errors=gradient_config_errors,
    ),
    Analysis(
        "vanishing",
        # Lemma 1 reads the weights and logits only: no x, no temperature
        reads=frozenset(),
        claims=("vanishing",),
        compare=True,
    ),
)

ANALYSES: dict[str, Analysis] = {a.name: a for a in REGISTRY}


def names(**fields: Any) -> list[str]:
    """The registered analyses whose fields have these values, in the registry's order."""
    return [a.name for a in REGISTRY if all(getattr(a, k) == v for k, v in fields.items())]


# The generic rules' analyses, those scored in Table 1, and the other derived lists.
PER_LENGTH = names(per_length=True)
GENERIC_SUMMARIES = names(generic_summary=True)
BOUND_CHECKS = names(bound_checks=True)
SCORED = [a.name for a in REGISTRY if a.claims]
COMPARED = names(compare=True)
FIGURES: dict[str, str] = {a.figure: a.name for a in REGISTRY if a.figure}
ROW_ANALYSES: dict[str, ValuesAt] = {a.name: a.row_values for a in REGISTRY if a.row_values}
# The summary each claim id is read from (Table 1's ``summary`` column): a reading of the paper's
# open choices reaches a claim only through it (robustness).
CLAIM_SUMMARIES: dict[str, str] = {claim: a.name for a in REGISTRY for claim in a.claims}
READING_KEYS_READ: dict[str, frozenset[str]] = {a.name: a.reads for a in REGISTRY}


def caption(figure: str) -> str:
    """The report caption of a registered figure."""
    text = ANALYSES[FIGURES[figure]].caption
    if text is None:
        raise ValueError(
            f"analysis {FIGURES[figure]!r} registers figure {figure!r} without a caption"
        )
    return text
