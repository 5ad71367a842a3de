"""The study's answer: the table "normalizer x limit" with a verdict per cell, the figure, and the
fields of docs/study.md (prose from workflow/resources/study_template.md, every number from the
study's own models)."""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from attnlimits import rules as rule_table

from ..study import (
    fixed_temperature_rules,
    limit_measures,
    same_weights_as_baseline,
)
from ..study_limits import (
    CEILING,
    FIXED_TEMPERATURE,
    LIMITS,
    LOW_TEMPERATURE,
    NO_CHANGE,
    RELAXES,
    TIGHTENS,
)
from ..study_seeds import SeedMeasure, capped_verdicts, family_text
from ..tables import markdown_table
from .study_gradient_text import (
    bound_check,
    gradient_header,
    gradient_row,
    low_temperature_fall,
    low_temperature_lead,
    over_printed_bound,
)
from .study_prose import (
    UNTRAINED_ALREADY,
    answer_line,
    answer_line_over_seeds,
    orientation_table,
    shown,
    shown_difference,
    shown_over_seeds,
    significance_text,
    which_rule_when,
)


@dataclass
class Study:
    """The study's trained models (``models``: "study-<name>") and, per name, what the report
    reads of each; ``settings`` is config["study"], the per-model dicts are keyed by the model."""

    models: list[str]
    settings: dict
    seed: int
    n_fixed: dict[str, int]
    ns_ratio_threshold: dict[str, float]
    command: str
    samples: dict[str, pl.DataFrame]
    critical_n: dict[str, pl.DataFrame]
    separability: dict[str, pl.DataFrame]
    gradient: dict[str, pl.DataFrame]
    coverage: dict[str, pl.DataFrame]
    heads: dict[str, pl.DataFrame]
    histories: dict[str, pl.DataFrame]
    evaluations: dict[str, dict]
    timings: dict[str, dict]
    manifests: dict[str, dict]
    vocab_size: int
    # the models' normalizer names (default: "study-<name>" without its prefix), the seeds and
    # each normalizer's measures over them (study_seeds.seed_measures; None: one seed's page only)
    trained: dict[str, str] | None = None
    seeds: list[int] = field(default_factory=list)
    over_seeds: dict | None = None
    # every seed's limit_measures per normalizer, in seed order (None: one seed's page only)
    per_seed: dict | None = None
    # the comparisons on untrained weights (study_seeds.untrained_comparison) and their seed (None:
    # study.untrained_seeds is empty)
    untrained: dict | None = None
    # analysis.embedding per model: the x_i of d~, the critical N and separability
    embedding: dict[str, str] = field(default_factory=dict)
    untrained_seed: int | None = None
    # derived: the names, their rules, the limits measured and their verdicts, the grids
    names: list[str] = field(init=False)

    def __post_init__(self):
        if not self.models:
            raise ValueError(
                "study.normalizers is empty: no model to train (config/README.md: study)"
            )
        self.names = [
            self.trained[m] if self.trained else m.removeprefix("study-") for m in self.models
        ]
        self.model_of = dict(zip(self.names, self.models, strict=True))
        self.rules = {n: self.settings["normalizers"][n] for n in self.names}
        self.baseline = self.settings["baseline"]
        self.ratio = self.settings["relax_ratio"]
        # the sink is read at the training context: beyond it key 0 is farther than any
        # position the model saw (the largest analysed L at or below it)
        context = int(self.settings["training"]["context"])
        lengths = sorted(self.samples[self.names[0]]["L"].unique().to_list())
        self.sink_length = max([L for L in lengths if L <= context] or lengths[:1])
        # a fixed temperature's low-T sensitivity reports the temperature (study.FIXED_TEMPERATURE)
        self.withheld_by = {
            n: {"gradient_low_t": FIXED_TEMPERATURE} for n in fixed_temperature_rules(self.rules)
        }
        self.measures = {
            n: limit_measures(
                self.samples[n],
                self.critical_n[n],
                self.separability[n],
                self.evaluations[n],
                self.gradient[n],
                self.sink_length,
            )
            for n in self.names
        }
        # the rules whose weights function is the baseline's (gated attention): the page says
        # what their verdicts mean (a difference in the logits their models learnt)
        self.by_construction = same_weights_as_baseline(self.rules, self.baseline)
        # one measure per rule: the low-T verdicts its cap alone gives are withheld, as over seeds
        self.found = capped_verdicts(self.measures, self.baseline, self.ratio, self.withheld_by)
        first = self.names[0]
        self.l_max = int(self.samples[first]["L"].max())
        n_max = int(self.separability[first]["N"].max())
        self.contexts = sorted(c["context"] for c in self.evaluations[first]["contexts"])
        self.tail_percent = f"{self.settings['evaluation']['tail_fraction']:.0%}"
        self.sink_header = (
            f"Attention sink: first-token weight x L at L = {self.sink_length} (1: uniform)"
        )
        self.headers = {
            k: limit.header.format(
                l_lo=self.measures[first]["vanishing_fit_lengths"][0] or "?",
                l_hi=self.measures[first]["vanishing_fit_lengths"][1] or "?",
                l_max=self.l_max,
                n_max=n_max,
                c_max=f"{self.contexts[-1]} tokens",
                t_low=LOW_TEMPERATURE,
            )
            for k, limit in LIMITS.items()
        }


def rule_text(rule):
    params = ", ".join(f"{k}={v:g}" for k, v in rule.items() if k != "kind")
    return f"{rule['kind']}({params})" if params else rule["kind"]


def several_seeds(s: Study) -> bool:
    """Whether the verdicts are the ones over the seeds (the single-seed table gives none)."""
    return bool(s.over_seeds) and len(s.seeds) > 1


def limits_table(s: Study) -> tuple[pl.DataFrame, str]:
    """The normalizer x limit table: the CSV's columns (each limit's value and verdict, and the
    supporting numbers) and the Markdown table of the verdicts."""
    names, rules, gradient, histories = s.names, s.rules, s.gradient, s.histories
    measures, found, contexts = s.measures, s.found, s.contexts
    rows, csv_rows = [], []
    for n in names:
        m = measures[n]
        cells, record = [], {"normalizer": n, "rule": rule_text(rules[n])}
        for key in LIMITS:
            v = found[n][key]
            # with several seeds one seed's verdict would carry no interval: the measure only
            cells.append(shown(m, key) if several_seeds(s) else f"{v} ({shown(m, key)})")
            record[f"{key}"] = m[key]
            # the CSV keeps this seed's own verdicts (data); the page gives the seeds' verdicts
            record[f"{key}_verdict"] = v
        text, over = bound_check(gradient[n])
        record.update(
            {
                "first_token_weight": m["sink"],
                "max_weight_slope_in_L": m["vanishing_slope"],
                # the vanishing column's own fit: the slope within the training context
                "max_weight_slope_within_training_context": m["vanishing_fit_slope"],
                "median_max_weight_at_largest_L": m["vanishing_level"],
                "distance_upper": m["distance_upper"],
                "critical_n_lengths": m["distance_lengths"],
                "critical_n_censored": m["distance_censored"],
                # lengths whose KS test cannot reject at the sample count: left out (review 35)
                "critical_n_untestable": m.get("distance_untestable", 0),
                "gradient_bound_violations": over,
                "perplexity_at_training_context": m["perplexity"],
                "perplexity_at_longest_context": m["perplexity_longest"],
                "tail_perplexity_at_training_context": m["tail_perplexity"],
                "tail_perplexity_at_longest_context": m["tail_perplexity_longest"],
                "final_training_loss": float(histories[n]["loss"][-1]),
            }
        )
        csv_rows.append(record)
        rows.append(
            [
                n,
                rule_text(rules[n]),
                f"{m['perplexity']:.1f}",
                *cells,
                shown(m, "sink"),
                f"{m['vanishing_slope']:.2f}"
                if math.isfinite(m["vanishing_slope"])
                else "not measured (a median peak of 0 at some L)",
                text,
            ]
        )
    columns = [
        "normalizer",
        "rule",
        f"held-out ppl @ {contexts[0]}",
        *s.headers.values(),
        s.sink_header,
        "max-weight slope over every L",
        "||J|| bound over the T sweep",
    ]
    return pl.DataFrame(csv_rows), markdown_table(columns, rows)


def seeds_table(s: Study) -> tuple[pl.DataFrame, str]:
    """Per normalizer: the assumption of Lemma 1 its rule breaks, each limit's mean over the seeds
    with its t-interval and the verdict on the intervals, the held-out perplexity and its cost
    (the paired difference to the baseline's), and the attention sink with its difference: the
    CSV (one row per normalizer) and the Markdown."""
    over = s.over_seeds or {}
    rows, csv_rows = [], []
    for n in s.names:
        if n not in over:
            continue
        lemma1 = rule_table.get(s.rules[n]["kind"]).lemma1
        record = {"normalizer": n, "seeds": over[n]["perplexity"].seeds, "lemma1": lemma1}
        cells = [n, lemma1]
        for key in [*LIMITS, "perplexity", "perplexity_cost", "sink", "sink_change"]:
            m = over[n][key]
            record |= {f"{key}_mean": m.mean, f"{key}_low": m.low, f"{key}_high": m.high}
            if key in LIMITS:
                # known to intervals (the critical N's list cells, none censored): the mean of
                # the upper ends beside the low ends' mean (review 37; NaN where exact)
                record[f"{key}_upper_mean"] = m.upper_mean
            if key in LIMITS or key.endswith(("_cost", "_change")):
                record[f"{key}_verdict"] = m.verdict
            if key in LIMITS:
                # the paired ratio to the baseline the verdict reads (NaN where not paired)
                record |= {
                    f"{key}_ratio": m.ratio,
                    f"{key}_ratio_low": m.ratio_low,
                    f"{key}_ratio_high": m.ratio_high,
                    # the tests behind the verdict (study_seeds.seed_measures)
                    # a cell the caps withhold is in the corrected family with its cap-divided
                    # p (review 42); its sign test read the raw ratios: none printed
                    f"{key}_p": m.p_value,
                    f"{key}_sign_p": math.nan if m.verdict == CEILING else m.sign_p,
                    f"{key}_dropped_by_fdr": m.dropped,
                }
                cells.append(
                    f"{m.verdict}: {shown_over_seeds(m)}"
                    + significance_text(m, 1.0 - s.settings.get("interval_level", 0.95))
                    + untrained_text(s, n, key, m.verdict)
                )
                if s.untrained is not None and n in s.untrained:
                    u = s.untrained[n][key]
                    record |= {
                        f"{key}_untrained_ratio": u.ratio,
                        f"{key}_untrained_verdict": u.verdict,
                    }
            elif key.endswith(("_cost", "_change")):
                cells.append(m.verdict if m.verdict == "baseline" else shown_difference(m))
            else:
                cells.append(shown_over_seeds(m))
        rows.append(cells)
        csv_rows.append(record)
    headers = [
        "normalizer",
        "Lemma 1 assumption it breaks",
        *(s.headers[k] for k in LIMITS),
        f"held-out ppl @ {s.contexts[0]}",
        f"ppl cost: minus {s.baseline}'s, paired by seed",
        s.sink_header,
        f"sink minus {s.baseline}'s, paired by seed",
    ]
    return pl.DataFrame(csv_rows), markdown_table(headers, rows)


def embedding_note(embedding: Mapping[str, str]) -> str:
    """The Set-up's sentence on the x_i the study's diagnostics read (analysis.embedding per
    model): which vectors, and whether they are the paper's Eq. 1 x_i (review 47)."""
    names = sorted(set(embedding.values()))
    if not names:
        return ""
    said = " and ".join(f"`{e}`" for e in names)
    text = f"The x_i of d~, the critical N and separability: {said} (`analysis.embedding`)"
    if names == ["attention_input"]:
        return text + ", the layer's attention input, the paper's Eq. 1 x_i."
    return (
        text + ", not the layer's attention input that the paper's Eq. 1 reads (docs/paper-notes.md"
        " section 8): those three columns read what a model learnt in these vectors as well as"
        " in its weights."
    )


def untrained_length_note(s: Study, within: float = 1.05) -> str:
    """A bullet for the caveats where every rule's untrained length ratio lies within
    ``within``x of 1: an untrained model's perplexity hardly moves with the context, so those
    points say nothing of the rule (review 47); '' otherwise or without untrained models."""
    if not s.untrained:
        return ""
    ratios = [
        u["length"].ratio
        for name, u in s.untrained.items()
        if name != s.baseline and "length" in u and not math.isnan(u["length"].ratio)
    ]
    if not ratios or not all(1.0 / within <= r <= within for r in ratios):
        return ""
    return (
        f"- The untrained length cells read x{min(ratios):.4f} to x{max(ratios):.4f}: an untrained"
        " model's perplexity hardly moves with the context, whatever its rule, so those points"
        " carry no information on the rule."
    )


# the limits whose measure the logits' spread moves whatever the model learnt: Corollary 3's
# low-temperature T ||J|| (i.i.d. Gaussian logits give sigmoid 2.4-5.9 times softmax's by
# their spread alone: tests/test_study_untrained.py)
SPREAD_DEPENDENT = frozenset({"gradient_low_t"})


def untrained_text(s: Study, name: str, key: str, trained_verdict: str) -> str:
    """'; untrained (seed 0): x r, <verdict>', and where both sides are decided, whether the
    untrained weights already give the trained verdict: a comparison, not a cause (one untrained
    seed, a point against the ratio; the trained verdict reads the seeds' paired interval and
    Benjamini-Hochberg). '' without untrained models or for the baseline."""
    if s.untrained is None or name not in s.untrained or name == s.baseline:
        return ""
    u = s.untrained[name][key]
    ratio = "" if math.isnan(u.ratio) else f"x{u.ratio:.3g}, "
    # one untrained point inside the ratio shows no change of the limit, only no step as large
    # as the ratio (review 42)
    said = f"within {s.ratio:g}x" if u.verdict == NO_CHANGE else u.verdict
    # a measure that moves with the logits' spread: the untrained point sits at another spread
    # than the trained model's, so it is not the null of what the rule alone gives (review 47)
    at = ", at its own logit spread, not a matched-spread null" if key in SPREAD_DEPENDENT else ""
    text = f"; untrained (seed {s.untrained_seed}{at}): {ratio}{said}"
    decided = (RELAXES, TIGHTENS, NO_CHANGE)
    if trained_verdict in (RELAXES, TIGHTENS) and u.verdict in decided:
        text += (
            f": {UNTRAINED_ALREADY}"
            if u.verdict == trained_verdict
            else ": the one untrained point does not show it"
        )
    return text


def per_seed_table(per_seed: dict[str, list[dict]], seeds: list[int]) -> pl.DataFrame:
    """Every seed's measures (``per_seed``: normalizer -> one limit_measures dict per seed, in
    the order of ``seeds``), long: one row per normalizer, seed and numeric measure."""
    rows = [
        {"normalizer": n, "seed": seed, "measure": key, "value": float(value)}
        for n, measures in per_seed.items()
        for seed, m in zip(seeds, measures, strict=True)
        for key, value in m.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]
    return pl.DataFrame(
        rows,
        schema={
            "normalizer": pl.String,
            "seed": pl.Int64,
            "measure": pl.String,
            "value": pl.Float64,
        },
    )


def limits_markdown(s: Study, table_md: str) -> str:
    return (
        f"Normalizer x limit on the study's trained models (verdicts against {s.baseline}, "
        f"ratio {s.ratio:g}; docs/study.md)\n\n{table_md}"
    )


def entropy_share(h: pl.DataFrame) -> str:
    share = (h["entropy"] / h["entropy_uniform"]).mean()
    # no entropy for a row with a negative weight (the raw Self-Adjust rule's z * softmax(z)) or
    # with no positive weight (softpick's all-zero rows), and one such row leaves the mean NaN
    if share is None or np.isnan(share):
        return "n/a (rows with negative or no positive weights)"
    return f"{share:.2f}"


def heads_row(s: "Study", n: str) -> list[str]:
    """Model ``n``'s row of the page's heads table: per-head N_s/N, flags, entropy, coverage."""
    h, c = s.heads[n], s.coverage[n]
    threshold = s.ns_ratio_threshold[s.model_of[n]]
    at_n = c.filter(pl.col("N") == int(h["N"][0]))
    flagged = int((h["ns_ratio"] <= threshold).sum())
    return [
        n,
        f"{h['ns_ratio'].min():.2f} / {h['ns_ratio'].median():.2f} / {h['ns_ratio'].max():.2f}",
        f"{flagged} of {h.height}",
        entropy_share(h),
        # a (layer, chunk) where no head selects anything has none of the three (review 34)
        " / ".join(
            "n/a" if (m := at_n[c].fill_nan(None).mean()) is None else f"{m:.3f}"
            for c in ("coverage", "predicted_paper", "predicted_overlap")
        ),
    ]


def page_fields(s: Study, table_md: str) -> dict[str, str]:
    """The fields of the study page's template, every number from the study's models."""
    names, models, rules, study, p = s.names, s.models, s.rules, s.settings, s
    gradient, heads, histories, evaluations = s.gradient, s.heads, s.histories, s.evaluations
    measures, found, l_max, contexts = s.measures, s.found, s.l_max, s.contexts
    headers, tail_percent, baseline, ratio = s.headers, s.tail_percent, s.baseline, s.ratio
    manifests, timings = s.manifests, s.timings
    arch, tr = study["architecture"], study["training"]
    temperatures = sorted(gradient[names[0]]["T"].unique())
    setup_rows = [
        [
            n,
            rule_text(rules[n]),
            f"{manifests[n]['parameters']:,}",
            f"{timings[n]['seconds']:.0f} s",
            f"{timings[n]['tokens_per_s']:,.0f}",
            f"{float(histories[n]['loss'][-1]):.3f}",
            " / ".join(
                f"{c['perplexity']:.1f} ({c['tail_perplexity']:.1f})"
                for c in sorted(evaluations[n]["contexts"], key=lambda c: c["context"])
            ),
        ]
        for n in names
    ]
    return {
        "command": p.command,
        "vocab_size": str(s.vocab_size),
        "training_tokens": f"{manifests[names[0]]['training_tokens']:,}",
        "held_out_tokens": f"{manifests[names[0]]['held_out_tokens']:,}",
        "architecture": (
            f"{arch['layers']} layers, {arch['heads']} heads ({arch['kv_heads']} KV heads), "
            f"d = {arch['hidden_size']}, MLP {arch['intermediate_size']}, RoPE (theta "
            f"{arch['rope_theta']:g}), {arch['max_positions']} positions"
        ),
        "budget": (
            f"{tr['steps']} steps x {tr['batch_size']} windows x {tr['context']} tokens = "
            f"{tr['steps'] * tr['batch_size'] * tr['context']:,} tokens, AdamW (lr "
            f"{tr['learning_rate']:g}, warm-up {tr['warmup_steps']}, cosine), seed {p.seed} (of {p.seeds or [p.seed]})"
        ),
        "training_table": markdown_table(
            [
                "normalizer",
                "rule",
                "parameters",
                "training time",
                "tokens/s",
                "final training loss",
                "held-out ppl (last " + tail_percent + ") @ " + " / ".join(map(str, contexts)),
            ],
            setup_rows,
        ),
        "table": table_md,
        "seeds": ", ".join(map(str, s.seeds or [s.seed])),
        "seed": str(s.seed),
        "interval_level": f"{s.settings.get('interval_level', 0.95):.0%}",
        "seeds_table": seeds_table(s)[1] if s.over_seeds else "(one seed: no intervals)",
        "family": family_text(s.over_seeds, 1.0 - s.settings.get("interval_level", 0.95))
        if s.over_seeds
        else "(one seed: no tests)",
        "which_rule": which_rule_when(
            seeds_table(s)[0],
            baseline,
            {n: "a local window" for n in names if rule_table.get(rules[n]["kind"]).local},
            s.ratio,
        )
        if s.over_seeds
        else "(one seed: no intervals, no summary)",
        "by_construction": ", ".join(sorted(s.by_construction)) or "none here",
        "embedding": embedding_note(s.embedding),
        "untrained_length": untrained_length_note(s),
        "gradient_table": markdown_table(
            [
                "normalizer",
                gradient_header(temperatures),
                "largest ||J|| (at T)",
                "largest ||J|| / bound",
                "bound check",
            ],
            [gradient_row(s, n) for n in names],
        ),
        "gradient_length": str(int(gradient[names[0]]["L"][0])),
        "gradient_rows": str(gradient[names[0]].filter(pl.col("T") == temperatures[0]).height),
        "heads_table": markdown_table(
            [
                "normalizer",
                "per-head N_s/N: min / median / max",
                f"heads with N_s/N <= {p.ns_ratio_threshold[models[0]]:g}",
                "mean entropy / log L",
                # the paper's formula with p = N_s / |selected| and H the heads selecting anything
                # (coverage.head_coverage; the paper's own where no top-N weight is 0, review 35)
                "coverage: measured / paper's formula (p over selected tokens) / overlap-aware",
            ],
            [heads_row(s, n) for n in names],
        ),
        "heads_n": str(int(heads[names[0]]["N"][0])),
        "heads_length": str(int(heads[names[0]]["L"][0])),
        "heads_chunks": str(int(heads[names[0]]["chunks"][0])),
        "baseline": baseline,
        "ratio": f"{ratio:g}",
        "seeds_caveat": (
            "only the verdicts over the seeds are given, and they need their intervals apart"
            if several_seeds(s)
            else "one seed: its verdicts read one model per rule, with no interval, so a seed's "
            "luck is not told apart from the rule's effect"
        ),
        "answers": "\n".join(
            f"- {answer_line_over_seeds(k, headers[k], s.over_seeds, baseline)}"
            if several_seeds(s)
            else f"- {answer_line(k, headers[k], measures, found, baseline)}"
            for k in LIMITS
        ),
        "one_seed_note": (
            "Its cells give the measures only: one seed's verdict would have no interval, and the"
            " verdicts are those over the seeds above."
            if several_seeds(s)
            else "Each cell: the verdict against the baseline from this one seed (no interval),"
            " then the measure; a measure at least the ratio x the baseline's on the side that"
            " relaxes the limit relaxes it (the two shares compared on their odds)."
        ),
        "orientation_table": orientation_table(),
        "low_temperature": f"{LOW_TEMPERATURE:g}",
        "censored_lengths": ", ".join(
            f"{n} {measures[n]['distance_censored']} of {measures[n]['distance_lengths']}"
            + (
                f" ({measures[n]['distance_untestable']} more not testable)"
                if measures[n].get("distance_untestable")
                else ""
            )
            for n in names
        ),
        "l_max": str(l_max),
        "sink_length": str(s.sink_length),
        "blow_ups": blow_ups(
            s.per_seed or {},
            baseline,
            # the verdicts the page gives: over the seeds, or this seed's own on a one-seed page
            {n: m["length"] for n, m in (s.over_seeds or {}).items()}
            if several_seeds(s)
            else {
                n: SeedMeasure(math.nan, math.nan, math.nan, 1, s.found[n]["length"])
                for n in s.names
            },
        ),
        "empty_rows": empty_rows(s.samples),
        "baseline_distance": shown_over_seeds(s.over_seeds[baseline]["distance"])
        if s.over_seeds
        else shown(measures[baseline], "distance"),
        "baseline_distance_vs_paper": baseline_against_paper(s, measures[baseline]),
        "low_t_fall": low_temperature_fall(
            gradient[baseline], baseline, s.seed if several_seeds(s) else None
        ),
        "low_t_lead": low_temperature_lead(gradient[baseline]),
        "baseline_over_printed_bound": over_printed_bound(gradient[baseline]),
        "training_context": str(s.settings["training"]["context"]),
        "contexts": " / ".join(map(str, contexts)),
        "context_multiples": context_multiples(contexts),
        "tail_percent": tail_percent,
        "evaluation_tokens": f"{contexts[-1] * evaluations[names[0]]['contexts'][-1]['windows']:,}",
    }


def blow_ups(
    per_seed: dict[str, list[dict]],
    baseline: str,
    length_measures: Mapping[str, SeedMeasure] | None = None,
    factor: float = 2.0,
) -> str:
    """The rules whose held-out perplexity (last positions) grows from the training context to
    the longest one at least ``factor`` times as much as the baseline's of the same seed, in
    every seed, in words: each rule's growth against the baseline's, then its
    length-generalisation verdict with its paired ratio (``length_measures``). A rule worse at
    every context by the same factor is no blow-up beyond the training context."""
    base = per_seed.get(baseline)
    if not base:
        return ""
    short, longest = "tail_perplexity", "tail_perplexity_longest"

    def growth(m: Mapping) -> float | None:
        v, w = m.get(longest), m.get(short)
        return v / w if v and w else None

    named = []
    for n, ms in per_seed.items():
        if n == baseline or len(ms) != len(base):
            continue
        pairs = [(growth(m), growth(b)) for m, b in zip(ms, base, strict=True)]
        # a blow-up: the rule's perplexity grows beyond the training context, and at least
        # ``factor`` times as much as the baseline's (x1 against x0.5 grows nothing)
        if all(v and w and v > 1 and v >= factor * w for v, w in pairs):
            shown = " / ".join(f"x{v:,.3g}" for v, _ in pairs)
            against = " / ".join(f"x{w:,.3g}" for _, w in pairs)
            m = (length_measures or {}).get(n)
            verdict = ""
            if m is not None:
                verdict = f"; its length verdict: {m.verdict}"
                if m.dropped:
                    verdict += f" ({m.dropped} on its own, not kept by Benjamini-Hochberg)"
                if math.isfinite(m.ratio) and math.isfinite(m.ratio_low):
                    verdict += (
                        f", paired ratio x{m.ratio:.3g} [{m.ratio_low:.3g}, {m.ratio_high:.3g}]"
                    )
            named.append(f"{n} ({shown} against {against}{verdict})")
    if not named:
        return ""
    return (
        f"From the training context to the longest, perplexity on the last positions grows, "
        f"and by a factor (longest over training) at least {factor:g}x {baseline}'s of the same "
        f"seed, in every seed, for: {'; '.join(named)}."
    )


def empty_rows(samples: dict[str, pl.DataFrame]) -> str:
    """Per model with any, the share of its analysed rows (every L) with no weight above 0."""
    shares = {
        n: float((frame["support"] == 0).mean())
        for n, frame in samples.items()
        if "support" in frame.columns
    }
    listed = [f"{n} {share:.1%}" for n, share in shares.items() if share > 0]
    return ", ".join(listed) + " of the rows" if listed else "none here"


# the paper's "N_crit ~ 0.06 L" for GPT-2, as the claim card's approximate band reads it
PAPER_SHARE, PAPER_BAND = 0.06, (0.03, 0.12)


def against_paper_share(low: float, high: float, point: float = math.nan) -> str:
    """Where an N_crit / L with interval [low, high] (``point`` on both ends where there is no
    interval) lies against the paper's approximately 0.06 L, read on its band [0.03, 0.12]."""
    if math.isnan(low) or math.isnan(high):
        low = high = point
    band = f"approximately {PAPER_SHARE:g} L ({PAPER_BAND[0]:g}-{PAPER_BAND[1]:g} L)"
    if math.isnan(low):
        return f"not measured against the paper's {band}"
    if low > PAPER_BAND[1]:
        return f"above the paper's {band}"
    if high < PAPER_BAND[0]:
        return f"below the paper's {band}"
    return f"not apart from the paper's {band}"


def baseline_against_paper(s: Study, measure: dict) -> str:
    """The baseline's N_crit / L against the paper's (:func:`against_paper_share`): its interval
    over the seeds, or its one value."""
    if s.over_seeds and several_seeds(s):
        m = s.over_seeds[s.baseline]["distance"]
        return against_paper_share(m.low, m.high, m.mean)
    # one seed: the mean share's ends (a censored length's lower end, its upper end)
    low, high = measure.get("distance"), measure.get("distance_upper")
    if low is None or high is None:
        return against_paper_share(math.nan, math.nan, math.nan if low is None else float(low))
    return against_paper_share(float(low), float(high))


def context_multiples(contexts: list[int]) -> str:
    """The evaluated contexts beyond the training context C (the first) as multiples of C:
    "2C, 4C and 8C"."""
    multiples = [f"{c / contexts[0]:g}C" for c in contexts[1:]]
    if not multiples:
        return "no longer context"
    return ", ".join(multiples[:-1]) + (" and " if len(multiples) > 1 else "") + multiples[-1]
