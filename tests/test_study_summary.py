"""The study's attention-sink measure, its paired differences to the baseline (the perplexity
cost and the sink's change), the verdicts of a rule whose weights are the baseline's by
construction (gated attention), and the "which rule to use when" summary, on hand-made rows."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from attnlimits_workflow import study, study_limits, study_seeds
from attnlimits_workflow.analyses import normalizer
from attnlimits_workflow.assemble import study_prose

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------------------ the sink
def test_the_sink_is_the_first_token_weight_times_L_at_the_asked_length():
    samples = pl.DataFrame(
        {
            "L": [4, 4, 8, 8, 8],
            "first_weight": [0.9, 0.9, 0.5, 0.2, 0.05],
            "max_weight": [0.9, 0.9, 0.5, 0.3, 0.4],
            "jacobian_norm": [0.1] * 5,
        }
    )
    # the largest L: (0.5 + 0.2 + 0.05) / 3 x 8 = 2 (twice a uniform row's 1/8)
    assert study.first_token_weight(samples) == pytest.approx(2.0)
    # the training context: L = 4 rows only, 0.9 x 4; a length not analysed: the one below it
    assert study.first_token_weight(samples, 4) == pytest.approx(3.6)
    assert study.first_token_weight(samples, 6) == pytest.approx(3.6)
    assert study.first_token_weight(samples.drop("first_weight")) is None


@pytest.mark.unit
def test_a_baseline_without_a_sink_names_no_rule_for_removing_it():
    rows = [
        {"normalizer": "softmax", "seeds": 3, "sink_mean": 0.6, "sink_low": 0.4, "sink_high": 0.8},
        {
            "normalizer": "stick",
            "seeds": 3,
            "sink_change_verdict": study.LOWER,
            "perplexity_cost_verdict": study.NO_DIFFERENCE,
        },
    ]
    text = study_prose.which_rule_when(pl.DataFrame(rows), "softmax")
    sink = next(t for t in text.splitlines() if "sink must go" in t)
    # review 39: not shown above uniform is no shown absence; the rule shown lower is named
    assert "softmax's models are not shown to have a sink" in sink
    assert "so no rule is named for removing one" in sink
    assert "Shown lower than softmax's all the same: stick" in sink
    rows[0]["sink_low"] = 1.5  # a sink shown: the lower rule is named
    text = study_prose.which_rule_when(pl.DataFrame(rows), "softmax")
    assert "lower than softmax's: stick" in next(
        t for t in text.splitlines() if "sink must go" in t
    )


@pytest.mark.unit
def test_zero_weight_rows_withhold_the_critical_n_verdict_and_a_fixed_temperature_the_low_t():
    def seeds(distance, zero_rows=0.0, low_t=0.05, spread=10):
        return [
            {
                "distance": d,
                "zero_weight_rows": zero_rows,
                "gradient_low_t": low_t * (1 + i / spread),
            }
            for i, d in enumerate(distance)
        ]

    per_seed = {
        "softmax": seeds([0.10, 0.11, 0.12]),
        "sa": seeds([0.9, 0.91, 0.92], zero_rows=1.0),  # far apart, but every row has a 0
        # its own seed-to-seed spread: a ratio equal on every seed has no spread for a t-test
        # (its p is the exact 0.25, which Benjamini-Hochberg drops)
        "dense": seeds([0.9, 0.91, 0.92], zero_rows=0.01, low_t=0.005, spread=7),
        "hot": seeds([0.10, 0.11, 0.12], low_t=0.005),
    }
    fixed = study.fixed_temperature_rules(
        {"softmax": {"kind": "softmax", "temperature": 1.0}, "hot": {"temperature": 10.0}}
    )
    assert fixed == {"hot"}
    got = study_seeds.seed_measures(
        per_seed,
        "softmax",
        1.5,
        0.95,
        {n: {"gradient_low_t": study.FIXED_TEMPERATURE} for n in fixed},
    )
    assert got["sa"]["distance"].verdict == study.ZERO_WEIGHT_DISTANCE
    assert got["dense"]["distance"].verdict == study.RELAXES
    assert got["dense"]["gradient_low_t"].verdict == study.RELAXES  # 10x smaller
    assert got["hot"]["gradient_low_t"].verdict == study.FIXED_TEMPERATURE


@pytest.mark.unit
def test_zero_weight_row_share_counts_rows_with_support_below_L():
    samples = pl.DataFrame({"L": [4, 4, 8, 8], "support": [4, 3, 8, 8]})
    assert study.zero_weight_row_share(samples) == pytest.approx(0.25)
    assert study.zero_weight_row_share(samples.drop("support")) == 0.0


def test_the_normalizer_job_records_each_rows_first_weight():
    """Hand-made logits over L = 4: softmax of [ln 6, ln 2, ln 1, ln 1] puts 6/10 on key 0;
    sparsemax of [1, 0, 0, 0] puts all of it there; softmax of a uniform row 1/4."""
    from test_analyses import make_pack  # the analyses' own hand-made packs

    logits = np.log([[6.0, 2.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    pack = make_pack(np.full((2, 4), 0.25), np.eye(4), logits=logits)
    settings = normalizer.Settings(
        entry={"kind": "softmax"},
        max_samples=10,
        n_fixed=1,
        zero_weight="not_selected",
        ks_alpha=0.01,
        mc_draws=2,
        separability_length=4,
        n_grid=[1],
        radius=1.0,
        seed=0,
        critical_n_fractions=[0.5],
        critical_n_band_edges=[],
    )
    samples = normalizer.analyse([pack], "softmax", settings, learned={}).samples
    assert sorted(samples["first_weight"].to_list()) == pytest.approx([0.25, 0.6])
    sparse = normalizer.analyse(
        [make_pack(np.full((1, 4), 0.25), np.eye(4), logits=[[1.0, 0.0, 0.0, 0.0]])],
        "sparsemax",
        settings.__class__(**{**settings.__dict__, "entry": {"kind": "sparsemax"}}),
        learned={},
    ).samples
    assert sparse["first_weight"].to_list() == [1.0]


# ------------------------------------------------------------------- paired differences
def seeds(*values, key="perplexity"):
    return [{key: v} for v in values]


def test_paired_differences_by_hand():
    per_seed = {
        "softmax": seeds(10.0, 12.0, 14.0),
        # differences 1, 2, 3: mean 2, half-width t_{0.975, 2} / sqrt(3) = 2.484
        "costly": seeds(11.0, 14.0, 17.0),
        "cheaper": seeds(9.0, 11.0, 13.0),  # -1, -1, -1: no spread, shown lower
        "mixed": seeds(11.0, 11.0, 15.0),  # +1, -1, +1: interval across 0
        "missing": [{"perplexity": 10.0}, {"perplexity": None}, {"perplexity": 1.0}],
    }
    got = study_seeds.paired_differences(per_seed, "softmax", "perplexity", 0.95)
    assert got["softmax"].verdict == "baseline" and got["softmax"].mean == 0.0
    costly = got["costly"]
    assert costly.mean == pytest.approx(2.0)
    assert costly.high - 2.0 == pytest.approx(4.302652729911275 / math.sqrt(3))
    assert costly.low < 0 and costly.verdict == study.NO_DIFFERENCE  # 2 - 2.48 < 0
    assert got["cheaper"].verdict == study.LOWER and got["cheaper"].mean == -1.0
    assert got["mixed"].verdict == study.NO_DIFFERENCE
    assert got["missing"].verdict == study.NOT_MEASURED
    one = study_seeds.paired_differences(
        {"softmax": seeds(10.0), "a": seeds(12.0)}, "softmax", "perplexity", 0.95
    )
    assert one["a"].verdict == study.ONE_SEED and one["a"].mean == 2.0
    assert study_prose.shown_difference(one["a"]) == "+2"
    assert study_prose.shown_difference(got["cheaper"]) == "-1 [-1, -1]"
    with pytest.raises(ValueError, match="seeds' measures"):
        study_seeds.paired_differences(
            {"softmax": seeds(1.0, 2.0), "a": seeds(1.0)}, "softmax", "perplexity", 0.95
        )


def test_a_paired_difference_is_shown_where_unpaired_intervals_overlap():
    # the seeds move both models alike; the rule is 1 higher at every seed
    per_seed = {"softmax": seeds(10.0, 20.0, 30.0), "rule": seeds(11.0, 21.0, 31.0)}
    got = study_seeds.paired_differences(per_seed, "softmax", "perplexity", 0.95)["rule"]
    assert got.verdict == study.HIGHER and got.low == got.high == pytest.approx(1.0)


def test_seed_measures_carry_the_cost_and_the_sink_change():
    per_seed = {
        "softmax": [{"perplexity": 10.0, "sink": 0.5}, {"perplexity": 11.0, "sink": 0.6}],
        "gated": [{"perplexity": 9.0, "sink": 0.1}, {"perplexity": 10.5, "sink": 0.15}],
    }
    got = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)
    assert got["gated"]["perplexity_cost"].mean == pytest.approx(-0.75)
    assert got["gated"]["sink_change"].mean == pytest.approx(-0.425)
    # the sink, positive: its geometric mean sqrt(0.1 x 0.15), an interval never below 0
    sink = got["gated"]["sink"]
    assert sink.mean == pytest.approx(0.015**0.5) and sink.verdict == "" and sink.log_scale


# --------------------------------------------------------------- by construction (gated)
def test_gated_attention_uses_softmaxs_rule_and_still_gets_verdicts():
    entries = {
        "softmax": {"kind": "softmax"},
        "gated": {"kind": "gated_softmax"},
        "gated_T2": {"kind": "gated_softmax", "temperature": 2.0},  # other weights
        "sink": {"kind": "softmax_sink"},  # no gate
    }
    assert study.same_weights_as_baseline(entries, "softmax") == {"gated"}
    assert study.same_weights_as_baseline(entries, "sink") == set()
    # the same rule, but its model's own logits: a difference in them is a finding, not a
    # verdict fixed in advance
    measures = {
        "softmax": {"vanishing": 0.02, "length": 0.5, "separability": 0.5},
        "gated": {"vanishing": 0.2, "length": 1.0, "separability": 0.9},
    }
    found = study.verdicts(measures, "softmax", 1.5)
    assert found["gated"]["vanishing"] == study.RELAXES
    assert found["gated"]["separability"] == study.RELAXES  # odds 9 against 1
    assert found["gated"]["length"] == study.RELAXES
    # two seeds whose paired ratios differ a little (an exact agreement has no t-test's spread:
    # its exact p with two seeds is 0.5)
    per_seed = {
        n: [m, {**m, "vanishing": m["vanishing"] * k}]
        for (n, m), k in zip(measures.items(), (1.01, 1.05), strict=True)
    }
    over = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)
    assert over["gated"]["vanishing"].verdict == study.RELAXES


def test_a_censored_seed_mean_reads_as_a_lower_bound():
    per_seed = {
        "softmax": [{"distance": 0.1}, {"distance": 0.12}],
        "rule": [{"distance": 0.5, "distance_upper": 1.0}, {"distance": 0.6}],
    }
    over = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)
    assert over["rule"]["distance"].lower_bound and not over["softmax"]["distance"].lower_bound
    assert study_prose.shown_over_seeds(over["rule"]["distance"]).startswith(">= 0.55 [")


def test_a_seed_known_to_its_list_cell_reads_as_a_range():
    """Review 36: the normalizer job's critical N is a first pass of Algorithm 3's list, known
    to its cell; with no length censored, the share over the seeds is the range of the means of
    both ends, not a lower bound, and no paired ratio is formed from cell ends."""
    per_seed = {
        "softmax": [
            {"distance": 0.1, "distance_censored": 0},
            {"distance": 0.12, "distance_censored": 0},
        ],
        "rule": [
            {"distance": 0.5, "distance_upper": 0.6, "distance_censored": 0},
            {"distance": 0.6, "distance_upper": 0.7, "distance_censored": 0},
        ],
    }
    over = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)
    rule = over["rule"]["distance"]
    assert not rule.lower_bound and rule.upper_mean == pytest.approx(0.65)
    assert study_prose.shown_over_seeds(rule).startswith("0.55 to 0.65 [")
    assert math.isnan(rule.ratio)
    assert study_prose.shown(
        {"distance": 0.5, "distance_upper": 0.6, "distance_censored": 0, "distance_lengths": 6},
        "distance",
    ) == ("0.5 to 0.6; 0 of 6 L censored")


# ------------------------------------------------------------------ which rule to use when
def table(*rows):
    """A seeds table of hand-made rows: (name, {limit: verdict}, cost (mean, low, high,
    verdict), sink change verdict); every other limit 'no difference shown'."""
    records = []
    for name, verdicts, cost, sink in rows:
        record = {"normalizer": name, "seeds": 3}
        for key in study.LIMITS:
            record[f"{key}_verdict"] = verdicts.get(
                key, "baseline" if name == "softmax" else study.NO_DIFFERENCE
            )
        mean, low, high, found = cost
        record |= {
            "perplexity_cost_mean": mean,
            "perplexity_cost_low": low,
            "perplexity_cost_high": high,
            "perplexity_cost_verdict": found,
            "sink_change_mean": -0.3 if sink == study.LOWER else 0.0,
            "sink_change_low": -0.4,
            "sink_change_high": -0.2 if sink == study.LOWER else 0.1,
            "sink_change_verdict": sink,
        }
        records.append(record)
    return pl.DataFrame(records)


BASE = ("softmax", {}, (0.0, 0.0, 0.0, "baseline"), "baseline")


def line(text: str, lead: str) -> str:
    (found,) = [x for x in text.splitlines() if x.startswith(f"- **When {lead}")]
    return found


def test_which_rule_when_lists_the_helpers_cheapest_first_with_their_cost():
    t = table(
        BASE,
        (
            "sparsemax",
            {"vanishing": study.RELAXES},
            (5.0, 2.0, 8.0, study.HIGHER),
            study.NO_DIFFERENCE,
        ),
        (
            "ssmax",
            {"vanishing": study.RELAXES, "length": study.TIGHTENS},
            (0.5, -1.0, 2.0, study.NO_DIFFERENCE),
            study.NO_DIFFERENCE,
        ),
        ("gated", {"separability": study.RELAXES}, (-2.0, -3.0, -1.0, study.LOWER), study.LOWER),
        (
            "raw",
            {"vanishing": study.TIGHTENS},
            (1.0, math.nan, math.nan, study.ONE_SEED),
            study.HIGHER,
        ),
    )
    text = study_prose.which_rule_when(t, "softmax")
    vanishing = line(text, "a few tokens")
    assert vanishing == (
        "- **When a few tokens must keep large weights at long contexts** (Vanishing attention "
        "(Lemma 1)): ssmax (perplexity cost unresolved, +0.5 [-1, +2]); sparsemax (costs +5 "
        "[+2, +8] held-out perplexity). Tightens it: raw."
    )
    assert line(text, "many selected").endswith(
        "gated (and lowers held-out perplexity, -2 [-3, -1])."
    )
    assert "Tightens it: ssmax." in line(text, "the model must read")
    assert "no rule is shown to relax it: of 4 rules compared" in line(text, "the model must read")
    assert "no verdict, both readings defensible" in line(text, "gradients must stay")
    assert line(text, "the attention sink").endswith(
        "lower than softmax's: gated (and lowers held-out perplexity, -2 [-3, -1]). "
        "Higher than softmax's: raw." + study_prose.UNCORRECTED
    )
    assert line(text, "held-out perplexity").endswith(
        "lower than softmax's: gated (and lowers held-out perplexity, -2 [-3, -1]). "
        "Higher: sparsemax." + study_prose.UNCORRECTED
    )
    assert len(text.splitlines()) == len(study.LIMITS) + 2


def test_which_rule_when_says_so_when_no_rule_helps():
    t = table(
        BASE,
        ("a", {}, (1.0, -1.0, 3.0, study.NO_DIFFERENCE), study.NO_DIFFERENCE),
        (
            "b",
            {"distance": study.TIGHTENS},
            (math.nan, math.nan, math.nan, study.NOT_MEASURED),
            study.NOT_MEASURED,
        ),
        ("c", {"separability": study.SUPPORT_LIMITED}, (1.0, -1.0, 3.0, study.NO_DIFFERENCE), ""),
    )
    text = study_prose.which_rule_when(t, "softmax")
    for key, limit in study.LIMITS.items():
        if limit.relaxes != "either":
            # no shown difference is not equivalence: how many rules were compared, and which not
            compared = 2 if key == "separability" else 3
            assert (
                f"no rule is shown to relax it: of {compared} rules compared with softmax, none "
                "has a paired-ratio interval wholly the configured ratio beyond it in the paper's "
                "direction (a point ratio beyond it is no shown difference)."
            ) in line(text, limit.when), key
    assert line(text, "many selected").endswith("Not compared: c: no verdict: support < N.")
    assert "Tightens it: b." in line(text, "the selected tokens")
    assert line(text, "the attention sink").endswith(
        "no rule's first-token weight is shown lower than softmax's."
    )
    assert line(text, "held-out perplexity").endswith(
        "no rule's held-out perplexity is shown lower than softmax's."
    )


def test_which_rule_when_names_what_benjamini_hochberg_dropped_and_unpaired_cells():
    """Review: a rule whose paired ratio lay beyond 1.5 on its own but was not kept by
    Benjamini-Hochberg was counted among the rules "compared" with "none has a paired ratio
    beyond it", which its own interval contradicts; an unpaired (censored) cell has no paired
    ratio to speak of. Both are named apart."""
    t = table(
        BASE,
        ("kept_out", {}, (1.0, -1.0, 3.0, study.NO_DIFFERENCE), study.NO_DIFFERENCE),
        ("plain", {}, (1.0, -1.0, 3.0, study.NO_DIFFERENCE), study.NO_DIFFERENCE),
        ("unpaired", {}, (1.0, -1.0, 3.0, study.NO_DIFFERENCE), study.NO_DIFFERENCE),
    )
    t = t.with_columns(
        pl.Series("vanishing_dropped_by_fdr", ["", study.RELAXES, "", ""]),
        pl.Series("vanishing_ratio", [1.0, 1.9, 1.1, math.nan]),
    )
    vanishing = line(study_prose.which_rule_when(t, "softmax"), "a few tokens")
    assert "of 1 rules compared with softmax, none has a paired-ratio interval wholly" in (
        vanishing
    ), vanishing
    assert (
        "Beyond it on its own, not kept by Benjamini-Hochberg across the table: kept_out."
        in vanishing
    )
    assert (
        "No paired ratio (a seed censored or known to its list cell only, unmeasured or "
        "non-positive; compared unpaired, on the interval ends): unpaired."
    ) in vanishing
    # review 11: a dropped cell without a ratio is named once, as dropped
    t = t.with_columns(pl.Series("vanishing_ratio", [1.0, math.nan, 1.1, math.nan]))
    vanishing = line(study_prose.which_rule_when(t, "softmax"), "a few tokens")
    assert vanishing.count("kept_out") == 1
    # review 37: every rule compared unpaired (the critical N's list cells): not "no rule could
    # be compared", but how many were compared unpaired and found not beyond the ratio
    t = t.with_columns(
        pl.Series("vanishing_dropped_by_fdr", ["", "", "", ""]),
        pl.Series("vanishing_ratio", [1.0, math.nan, math.nan, math.nan]),
    )
    vanishing = line(study_prose.which_rule_when(t, "softmax"), "a few tokens")
    assert "no rule is shown to relax it: of 3 rules compared with softmax unpaired" in (
        vanishing
    ), vanishing


def test_one_seed_with_a_withheld_cell_names_it_instead_of_zero_rules_compared():
    """One seed, one rule withheld at low T (its T ||J|| ceiling differs): the line read "of 0
    rules compared with softmax, none has ...", a comparison that never took place."""
    one = {k: study.ONE_SEED for k in study.LIMITS if study.LIMITS[k].relaxes != "either"}
    ceiling = {**one, "gradient_low_t": study_limits.CEILING}
    t = table(
        BASE,
        ("a", one, (1.0, math.nan, math.nan, study.ONE_SEED), study.ONE_SEED),
        ("b", ceiling, (1.0, math.nan, math.nan, study.ONE_SEED), study.ONE_SEED),
    )
    text = study_prose.which_rule_when(t, "softmax")
    (low,) = [x for x in text.splitlines() if study_limits.CEILING in x]
    assert "of 0 rules compared" not in low
    assert "one seed: no interval, so no difference from softmax is shown." in low
    assert low.endswith(f"Not compared: b: {study_limits.CEILING}."), low
    assert "Not compared" not in line(text, "a few tokens")
    # three seeds, every rule withheld: nothing compared either
    t = table(BASE, ("b", {"gradient_low_t": study_limits.CEILING}, (1.0, 0.5, 1.5, "x"), "x"))
    (low,) = [x for x in study_prose.which_rule_when(t, "softmax").splitlines() if "ceiling" in x]
    assert "no rule could be compared with softmax. Not compared: b: " in low, low


def test_which_rule_when_with_one_seed_and_an_unmeasured_cost():
    one = {k: study.ONE_SEED for k in study.LIMITS if study.LIMITS[k].relaxes != "either"}
    t = table(BASE, ("a", one, (1.0, math.nan, math.nan, study.ONE_SEED), study.ONE_SEED))
    text = study_prose.which_rule_when(t, "softmax")
    assert "one seed: no interval, so no difference from softmax is shown." in line(
        text, "a few tokens"
    )
    helped = table(
        BASE,
        (
            "a",
            {"vanishing": study.RELAXES},
            (math.nan, math.nan, math.nan, study.NOT_MEASURED),
            study.NO_DIFFERENCE,
        ),
    )
    assert "a (perplexity cost not measured)." in line(
        study_prose.which_rule_when(helped, "softmax"), "a few tokens"
    )
    single = table(
        BASE,
        (
            "a",
            {"vanishing": study.RELAXES},
            (3.0, math.nan, math.nan, study.ONE_SEED),
            study.NO_DIFFERENCE,
        ),
    )
    assert "a (perplexity +3, one seed: no interval)." in line(
        study_prose.which_rule_when(single, "softmax"), "a few tokens"
    )


def test_context_multiples_name_each_longer_context_by_its_multiple_of_the_training_one():
    from attnlimits_workflow.assemble.study_report import context_multiples

    assert context_multiples([128, 256, 512, 1024]) == "2C, 4C and 8C"
    assert context_multiples([128, 1024]) == "8C"
    assert context_multiples([100, 150]) == "1.5C"
    assert context_multiples([128]) == "no longer context"


@pytest.mark.unit
def test_empty_rows_lists_the_models_with_rows_of_no_positive_weight():
    from attnlimits_workflow.assemble.study_report import empty_rows

    samples = {
        "softmax": pl.DataFrame({"support": [4, 4, 8, 8]}),
        "softpick": pl.DataFrame({"support": [0, 3, 8, 8]}),
    }
    assert empty_rows(samples) == "softpick 25.0% of the rows"
    assert empty_rows({"softmax": samples["softmax"]}) == "none here"


@pytest.mark.unit
def test_the_sink_reads_each_rows_share_of_its_own_mass_and_negligible_weights_tie():
    # softpick-like rows of mass 0.5: 0.25 on key 0 is half the row, 4x uniform at L = 8; a row
    # of no positive mass is left out
    samples = pl.DataFrame(
        {"L": [8, 8, 8], "first_weight": [0.25, 0.25, 0.0], "row_sum": [0.5, 0.5, 0.0]}
    )
    assert study.first_token_weight(samples) == pytest.approx(4.0)
    # negligible but positive weights do not count for the critical N: d~ is continuous in them
    ties = pl.DataFrame({"L": [4, 4], "support": [4, 3], "resolvable_support": [2, 3]})
    assert study.zero_weight_row_share(ties) == pytest.approx(0.5)


@pytest.mark.unit
def test_blow_ups_name_a_rule_far_worse_than_the_baseline_in_every_seed():
    from attnlimits_workflow.assemble.study_report import blow_ups
    from attnlimits_workflow.study_seeds import SeedMeasure

    def seeds(*pairs):
        return [{"tail_perplexity": a, "tail_perplexity_longest": b} for a, b in pairs]

    per_seed = {
        "softmax": seeds((100, 164.0), (100, 174.0), (100, 180.0)),
        "sigmoid": seeds((100, 49_395.0), (100, 737.0), (100, 369.0)),  # >= 2x in every seed
        "ssmax": seeds((100, 249.0), (100, 181.0), (100, 210.0)),  # not in every seed
        # review 10: worse at every context by the same factor is no blow-up beyond training
        "worse": seeds((220, 360.0), (230, 400.0), (230, 410.0)),
    }
    # review 11: x1 against a baseline that improves (x0.5) grows nothing
    flat = {"softmax": seeds((100, 50.0)), "same": seeds((100, 100.0))}
    assert blow_ups(flat, "softmax") == ""
    text = blow_ups(per_seed, "softmax")
    assert "sigmoid (x494 / x7.37 / x3.69 against x1.64 / x1.74 / x1.8)" in text
    assert "ssmax" not in text and "worse" not in text
    assert blow_ups({"softmax": seeds((1, 1.0)), "ssmax": seeds((1, 1.9))}, "softmax") == ""
    # each rule's verdict and paired ratio, never a fixed reason (review 9, 10)
    tight = SeedMeasure(
        0.3, 0.2, 0.4, 3, study.TIGHTENS, ratio=0.33, ratio_low=0.32, ratio_high=0.34
    )
    text = blow_ups(per_seed, "softmax", {"sigmoid": tight})
    assert "its length verdict: tightens, paired ratio x0.33 [0.32, 0.34])" in text
    assert "too wide" not in text and "No such model" not in text
    dropped = SeedMeasure(
        0.3,
        0.2,
        0.4,
        3,
        study.NO_DIFFERENCE,
        ratio=0.5,
        ratio_low=0.2,
        ratio_high=0.9,
        dropped=study.TIGHTENS,
    )
    text = blow_ups(per_seed, "softmax", {"sigmoid": dropped})
    assert "no difference shown (tightens on its own, not kept by Benjamini-Hochberg)" in text


@pytest.mark.unit
def test_a_low_t_verdict_its_ceiling_alone_could_give_is_withheld():
    # the largest T ||J|| at T <= 0.1: 0.01 x 50 = 0.5 (T = 1 is not in the low-T region)
    sweep = pl.DataFrame({"T": [0.01, 0.1, 1.0], "jacobian_norm": [50.0, 2.0, 9.0]})
    assert study.jacobian_ceiling(sweep) == pytest.approx(0.5)
    assert math.isnan(study.jacobian_ceiling(sweep.filter(pl.col("T") > 0.1)))

    def seeds(values, cap):
        return [{"gradient_low_t": v, "gradient_low_t_cap": cap} for v in values]

    per_seed = {
        "softmax": seeds([0.05, 0.06, 0.07], 0.5),
        "sparse": seeds([0.10, 0.125, 0.135], 1.0),  # ~2x softmax's, as is its cap: withheld
        "sig": seeds([0.15, 0.19, 0.20], 0.25),  # ~3x under half the cap: stands
        "hidden": [{"gradient_low_t": v} for v in (0.15, 0.19, 0.20)],  # no cap: stands
    }
    # review 10: the caps are read before Benjamini-Hochberg, inside seed_measures; review 42:
    # every cell with caps, decided or not, enters the family with the larger of its raw and
    # its cap-divided p, so that the family does not depend on the outcomes
    over = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)
    assert over["sparse"]["gradient_low_t"].verdict == study.CEILING
    assert over["sig"]["gradient_low_t"].verdict == study.TIGHTENS
    assert over["hidden"]["gradient_low_t"].verdict == study.TIGHTENS
    from attnlimits.intervals import beyond_ratio_pvalue, paired_log_ratios

    def scaled(name):
        return tuple(m["gradient_low_t"] / m["gradient_low_t_cap"] for m in per_seed[name])

    p_scaled = beyond_ratio_pvalue(paired_log_ratios(scaled("sparse"), scaled("softmax")), 1.5)
    assert over["sparse"]["gradient_low_t"].p_value == pytest.approx(p_scaled)
    assert p_scaled > 0.05  # the withheld cell's p in the family is its large cap-divided one


@pytest.mark.unit
def test_the_benjamini_hochberg_family_is_fixed_before_the_outcomes():
    """Review 42: the cells the caps withhold, all of them decided, left the family, which
    then depended on the outcomes (a cell in or out by its result). Every tested cell is a
    member; a withheld one with its cap-divided p (review 10: its small raw p must not lift the
    others). Three cells, p 0.5 (withheld), 0.03 and 0.5 at q 0.05: 0.03 > 1/3 x 0.05, where
    without the withheld cell 0.03 <= 2/2 x 0.05 would have passed the larger rank."""
    from attnlimits_workflow.study_seeds import SeedMeasure, false_discovery_control

    def cell(verdict, p):
        return SeedMeasure(1.0, 0.5, 1.5, 3, verdict, p_value=p)

    measures = {
        "a": {"gradient_low_t": cell(study.CEILING, 0.5)},
        "b": {"vanishing": cell(study.TIGHTENS, 0.03)},
        "c": {"vanishing": cell(study.TIGHTENS, 0.04)},
    }
    out = false_discovery_control(measures, 0.05)
    # three members: ranks 1, 2 need 0.0167 and 0.0333: 0.03 and 0.04 fail at rank 2 (0.04 >
    # 0.0333), so neither is kept
    assert out["b"]["vanishing"].dropped == study.TIGHTENS
    assert out["c"]["vanishing"].dropped == study.TIGHTENS
    assert out["a"]["gradient_low_t"].verdict == study.CEILING
    # two members (the withheld cell left out, as before): 0.04 <= 2/2 x 0.05, both kept
    two = false_discovery_control({k: v for k, v in measures.items() if k != "a"}, 0.05)
    assert two["b"]["vanishing"].verdict == study.TIGHTENS


@pytest.mark.unit
def test_the_family_text_gives_what_each_procedure_keeps_and_the_cut_missed():
    """Review 47: the page said Holm would ask the first cell for a smaller p than
    Benjamini-Hochberg does; both cut it at q / m. The page now says, in numbers, what each
    keeps, and how far the smallest p missed, and whether the caps' cells decide it."""
    from attnlimits_workflow.study_seeds import SeedMeasure, family_text

    def cell(verdict, p):
        return SeedMeasure(1.0, 0.5, 1.5, 3, verdict, p_value=p)

    # 5 cells at q 0.05: first cut 0.01. 0.0105 misses it; in a family of 4 (0.05 / 0.0105 =
    # 4.8) it would pass, and the one withheld cell makes the fifth
    measures = {
        "a": {"gradient_low_t": cell(study.CEILING, 0.6)},
        "b": {"vanishing": cell(study.TIGHTENS, 0.0105), "length": cell(study.RELAXES, 0.3)},
        "c": {"vanishing": cell(study.NO_DIFFERENCE, 0.5), "length": cell(study.RELAXES, 0.025)},
        "d": {"vanishing": cell(study.NO_DIFFERENCE, math.nan)},  # no p: not a member
    }
    text = family_text(measures, 0.05, shown=2)
    assert text.startswith(
        "On this table the family holds 5 cells (1 of them withheld by the caps)."
    )
    assert "Benjamini-Hochberg keeps 0, Holm's step-down 0 (the same cells)." in text
    assert "b, Vanishing attention (Lemma 1): p = 0.0105 against 0.01 (rank 1)" in text
    assert (
        "c, Length generalisation (Scalable-Softmax's claim): p = 0.025 against 0.02 (rank 2)"
        in text
    )
    assert text.endswith(
        "The smallest would be kept in a family of at most 4 cells: it turns on the 1 cells the"
        " caps withhold, which stay in the family."
    )
    # 0.009 passes the first cut (both keep it) and 0.02 the second (BH only: Holm's 0.0125)
    measures["b"]["vanishing"] = cell(study.TIGHTENS, 0.009)
    measures["c"]["length"] = cell(study.RELAXES, 0.02)
    text = family_text(measures, 0.05, shown=2)
    assert "Benjamini-Hochberg keeps 2, Holm's step-down 1." in text
    assert "p = 0.009 against 0.01 (rank 1, kept)" in text and "would be kept" not in text
    assert (
        family_text({"d": measures["d"]}, 0.05)
        == "No cell has a p-value, so no correction applies."
    )


@pytest.mark.unit
def test_negligible_top_n_weights_withhold_the_critical_n_and_a_local_rule_is_named_so():
    # stick-breaking-like: no exact zero in the rows, but most top-N slots negligible
    local = [{"zero_weight_rows": 0.01, "separability_zero_weight": 0.63}]
    assert study.withheld("distance", local) == study.ZERO_WEIGHT_DISTANCE
    assert study.withheld("distance", [{"separability_zero_weight": 0.01}]) is None
    rows = [
        {"normalizer": "softmax", "vanishing_verdict": "baseline"},
        {"normalizer": "stick", "vanishing_verdict": study.RELAXES},
    ]
    text = study_prose.which_rule_when(pl.DataFrame(rows), "softmax", {"stick": "a local window"})
    assert "stick, a local window (" in text
    from attnlimits import rules

    assert rules.get("stick_breaking").local and rules.get("self_adjust_softmax_raw").signed


def test_which_rule_when_marks_a_verdict_the_untrained_weights_already_give():
    """Review of issue 46: sigmoid's 'tightens' appears on untrained weights too, so the summary
    says so beside its name, as the table's cell does; a rule whose untrained weights differ
    is named plainly."""
    t = table(
        BASE,
        (
            "sigmoid",
            {"gradient_low_t": study.TIGHTENS},
            (1.0, 0.5, 1.5, study.HIGHER),
            study.NO_DIFFERENCE,
        ),
        (
            "sparsemax",
            {"vanishing": study.RELAXES},
            (5.0, 2.0, 8.0, study.HIGHER),
            study.NO_DIFFERENCE,
        ),
        (
            "ssmax",
            {"vanishing": study.RELAXES},
            (0.5, -1.0, 2.0, study.NO_DIFFERENCE),
            study.NO_DIFFERENCE,
        ),
    ).with_columns(
        pl.Series("gradient_low_t_untrained_verdict", [None, study.TIGHTENS, None, None]),
        pl.Series("vanishing_untrained_verdict", [None, None, study.RELAXES, study.NO_CHANGE]),
    )
    text = study_prose.which_rule_when(t, "softmax")
    gradient = next(x for x in text.splitlines() if "Tightens it" in x)
    assert gradient.endswith("Tightens it: sigmoid (the untrained weights already give it).")
    vanishing = line(text, "a few tokens")
    assert "sparsemax, the untrained weights already give it (costs" in vanishing
    assert "ssmax (perplexity cost unresolved" in vanishing


def test_a_p_below_the_level_is_never_printed_as_the_level():
    """Review 22 (4): significance_text printed p = 0.0496 as "p = 0.05" beside a kept verdict."""
    m = study_seeds.SeedMeasure(2.0, 1.6, 2.4, 3, study.RELAXES, p_value=0.0496, sign_p=0.25)
    assert study_prose.significance_text(m) == "; p = 0.0496, sign test p = 0.25"
    assert study_prose.significance_text(m, 0.01) == "; p = 0.0496, sign test p = 0.25"
    dropped = study_seeds.SeedMeasure(
        2.0, 1.6, 2.4, 3, study.NO_DIFFERENCE, p_value=0.04999, dropped=study.RELAXES
    )
    assert "at p = 0.04999 on its own" in study_prose.significance_text(dropped)


def test_an_answer_line_names_a_cell_the_correction_dropped():
    """Review 22 (5): "No difference shown: ssmax (...; paired ratio x1.9 [1.6, 2.3])" beside an
    interval wholly beyond the ratio, without saying Benjamini-Hochberg dropped it."""
    base = study_seeds.SeedMeasure(1.0, 0.9, 1.1, 3, "baseline", values=(0.9, 1.0, 1.1))
    kept_out = study_seeds.SeedMeasure(
        1.9, 1.6, 2.3, 3, study.NO_DIFFERENCE, p_value=0.03, dropped=study.RELAXES
    )
    over = {"softmax": {"vanishing": base}, "ssmax": {"vanishing": kept_out}}
    line = study_prose.answer_line_over_seeds("vanishing", "Vanishing", over, "softmax")
    assert "ssmax (" in line
    assert "relaxes on its own, not kept by Benjamini-Hochberg)" in line, line


def test_sink_and_perplexity_differences_are_labelled_uncorrected():
    """Review 22 (3): the sink and perplexity "lower/higher" calls are single t-intervals per rule
    with no multiple-comparison control; in a null of 14 rules and 3 seeds 43 % of studies named
    at least one. The summary says so where it names any."""
    t = table(BASE, ("a", {}, (-3.0, -5.0, -1.0, study.LOWER), study.HIGHER))
    text = study_prose.which_rule_when(t, "softmax")
    for lead in ("the attention sink", "held-out perplexity"):
        assert line(text, lead).endswith(study_prose.UNCORRECTED), line(text, lead)
    plain = table(BASE, ("a", {}, (1.0, -1.0, 3.0, study.NO_DIFFERENCE), study.NO_DIFFERENCE))
    text = study_prose.which_rule_when(plain, "softmax")
    assert study_prose.UNCORRECTED not in text


def test_every_seed_above_reads_the_cells_upper_ends():
    """Review 37: a share known to its list cell in each seed is above the baseline's only
    where its low end is above the baseline's high end; overlapping cells say nothing."""

    def seeds(cells):
        return [{"distance": lo, "distance_upper": hi, "distance_censored": 0} for lo, hi in cells]

    per_seed = {
        "softmax": seeds([(0.60, 0.70), (0.62, 0.72), (0.64, 0.74)]),
        "overlap": seeds([(0.66, 0.76), (0.67, 0.77), (0.68, 0.78)]),
        "apart": seeds([(0.80, 0.90), (0.81, 0.91), (0.82, 0.92)]),
    }
    over = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)
    base = over["softmax"]["distance"]
    assert study_prose.seed_order(over["overlap"]["distance"], base, "softmax") == ""
    assert study_prose.seed_order(over["apart"]["distance"], base, "softmax").startswith(
        "every seed above softmax's"
    )


def test_a_share_interval_is_clipped_to_zero_and_one():
    """Review 38: a t-interval of shares printed past 1 ("0.655 to 0.735 [0.356, 1.04]")."""
    per_seed = {
        "softmax": [
            {"distance": 0.5, "distance_censored": 0},
            {"distance": 0.6, "distance_censored": 0},
        ],
        "rule": [
            {"distance": 0.6, "distance_upper": 0.7, "distance_censored": 0},
            {"distance": 0.9, "distance_upper": 0.99, "distance_censored": 0},
        ],
    }
    m = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)["rule"]["distance"]
    assert 0.0 <= m.low and m.high == 1.0
