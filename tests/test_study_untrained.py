"""What training did (issue 46, point 5): each study verdict beside the same comparison on the
rules' untrained weights. Sigmoid's 'tightens Corollary 3' appears on Gaussian logits that no
training shaped, so the page must call it the rule's, not training's."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from attnlimits import rules
from attnlimits_workflow import study, study_seeds
from attnlimits_workflow.assemble import study_figure, study_gradient_text, study_report
from attnlimits_workflow.config_study import study_errors, study_model_name, untrained_seeds

pytestmark = pytest.mark.unit

TEMPERATURES = [0.001, 0.00316, 0.01, 0.0316, 0.1, 0.316, 1.0]


def low_t_on_gaussian_logits(kind: str, spread: float, seed: int = 0) -> float:
    """The study's low-temperature measure (mean T ||J|| over T <= 0.1) of rule ``kind`` on
    rows of i.i.d. Gaussian logits, as an untrained model's are: the rule's plain Jacobian norm
    at each T, no trained weight anywhere."""
    logits = np.random.default_rng(seed).standard_normal((64, 128)) * spread
    rule = rules.get(kind)
    sweep = pl.concat(
        pl.DataFrame(
            {"T": np.full(64, t), "jacobian_norm": rule.jacobian_norm(logits / t, 128) / t}
        )
        for t in TEMPERATURES
    )
    return study.low_temperature_sensitivity(sweep)


@pytest.mark.parametrize("spread", [1.0, 2.0])
def test_sigmoid_tightens_corollary_3_on_untrained_logits_too(spread):
    measures = {
        name: {"gradient_low_t": low_t_on_gaussian_logits(kind, spread)}
        for name, kind in (("softmax", "softmax"), ("sigmoid", "sigmoid_attention"))
    }
    got = study_seeds.untrained_comparison(measures, "softmax", 1.5)["sigmoid"]["gradient_low_t"]
    assert got.verdict == study.TIGHTENS and got.ratio > 2.0


def stub_study(untrained: dict) -> study_report.Study:
    """Only what untrained_text reads: the comparisons, their seed, the baseline."""
    s = study_report.Study.__new__(study_report.Study)
    s.untrained, s.untrained_seed, s.baseline, s.ratio = untrained, 0, "softmax", 1.5
    return s


def test_a_verdict_says_whether_the_untrained_weights_give_it():
    same = stub_study({"sigmoid": {"gradient_low_t": study_seeds.Untrained(2.9, study.TIGHTENS)}})
    text = study_report.untrained_text(same, "sigmoid", "gradient_low_t", study.TIGHTENS)
    # review 47: Corollary 3's T ||J|| moves with the logits' spread, and the untrained model's
    # spread is not the trained one's: the point is labelled as no matched-spread null
    assert text == (
        "; untrained (seed 0, at its own logit spread, not a matched-spread null): x2.9, tightens:"
        " the untrained weights already give it"
    )
    other = stub_study({"gated": {"vanishing": study_seeds.Untrained(1.0, study.NO_CHANGE)}})
    text = study_report.untrained_text(other, "gated", "vanishing", study.RELAXES)
    # review 42: one point inside the ratio is no evidence of "no change", only of no 1.5x step
    assert text == "; untrained (seed 0): x1, within 1.5x: the one untrained point does not show it"
    # an untrained side that is not measured or withheld says so, and no comparison follows
    gone = stub_study({"gated": {"vanishing": study_seeds.Untrained(math.nan, study.NOT_MEASURED)}})
    text = study_report.untrained_text(gone, "gated", "vanishing", study.RELAXES)
    assert text == "; untrained (seed 0): not measured"
    assert study_report.untrained_text(other, "softmax", "vanishing", "baseline") == ""
    assert study_report.untrained_text(stub_study(None), "gated", "vanishing", "relaxes") == ""


def test_the_set_up_names_the_x_i_the_study_reads():
    """Review 47: the gated paragraph called its verdicts findings about the logits, while d~,
    the critical N and separability read the value vectors (analysis.embedding), which the gate
    changes; the page never said which x_i the study reads."""
    note = study_report.embedding_note({"study-softmax-seed0": "value", "study-gated": "value"})
    assert note.startswith("The x_i of d~, the critical N and separability: `value`")
    assert "not the layer's attention input that the paper's Eq. 1 reads" in note
    paper = study_report.embedding_note({"study-softmax-seed0": "attention_input"})
    assert paper.endswith("the layer's attention input, the paper's Eq. 1 x_i.")
    assert study_report.embedding_note({}) == ""


def test_untrained_ratios_by_hand():
    measures = {
        "softmax": {"vanishing": 0.2, "separability": 0.5, "distance": 0.1},
        "rule": {"vanishing": 0.5, "separability": 0.75, "distance": None},
    }
    got = study_seeds.untrained_comparison(measures, "softmax", 1.5)["rule"]
    assert got["vanishing"].ratio == pytest.approx(2.5) and got["vanishing"].verdict == "relaxes"
    # a share compares odds: 0.75 -> 3, 0.5 -> 1
    assert got["separability"].ratio == pytest.approx(3.0)
    assert math.isnan(got["distance"].ratio) and got["distance"].verdict == study.NOT_MEASURED


def test_untrained_models_are_named_and_need_a_trained_seed():
    assert study_model_name("sink", 2, untrained=True) == "study-sink-init2"
    assert study_model_name("sink", 2) == "study-sink-seed2"
    base = {
        "normalizers": {},
        "seeds": [0, 1],
        "untrained_seeds": [1, 5],
        "architecture": {"max_positions": 64, "heads": 4, "kv_heads": 2, "hidden_size": 32},
        "evaluation": {"contexts": [32]},
        "training": {"context": 32},
    }
    assert study_errors({"study": base}) == [
        "study.untrained_seeds[1]: 5 is not one of study.seeds [0, 1]: an untrained model is "
        "compared with the trained model of its own seed (the same initial weights)"
    ]


def test_untrained_seeds_default_to_the_first_seed():
    assert untrained_seeds({"seeds": [3, 4], "untrained_seeds": None}) == [3]
    assert untrained_seeds({"seeds": [3, 4]}) == [3]
    assert untrained_seeds({"seeds": [3, 4], "untrained_seeds": []}) == []


def test_the_untrained_low_t_comparison_reads_the_trained_scale():
    """As the trained cells are read (ceiling_withheld): the ratio of the T ||J|| themselves,
    printed on the scale of the trained ratio beside it, and a relaxes/tightens that does not
    survive dividing each by its rule's cap is withheld. Review 7: the untrained side printed
    the capped ratio (x6 here) beside the trained side's plain one."""
    measures = {
        "softmax": {"gradient_low_t": 0.06, "gradient_low_t_cap": 0.5},
        "sparse": {"gradient_low_t": 0.12, "gradient_low_t_cap": 1.0},
        "sig": {"gradient_low_t": 0.18, "gradient_low_t_cap": 0.25},
        "same": {"gradient_low_t": 0.066, "gradient_low_t_cap": 0.5},
    }
    got = study_seeds.untrained_comparison(measures, "softmax", 1.5)
    # twice softmax's T ||J|| under twice its cap: the cap gives it, no verdict
    assert got["sparse"]["gradient_low_t"].verdict == study.CEILING
    assert got["sparse"]["gradient_low_t"].ratio == pytest.approx(2.0)
    # three times under half the cap: tightens on both scales, printed as the plain x3
    assert got["sig"]["gradient_low_t"].verdict == study.TIGHTENS
    assert got["sig"]["gradient_low_t"].ratio == pytest.approx(3.0)
    assert got["same"]["gradient_low_t"].verdict == study.NO_CHANGE


def test_the_baseline_sweep_is_counted_against_the_printed_bound():
    """Review (S8): the page's count sits in a sentence about the printed min{1/(4T), sqrt 2};
    below T = 1/(4 sqrt 2) that bound is sqrt 2, not 1/(4T). At T = 0.01 an ||J|| of 3 exceeds
    sqrt 2 but not 1/(4T) = 25; at T = 1 an ||J|| of 0.3 exceeds 1/4 (the min there)."""
    sweep = pl.DataFrame({"T": [0.01, 0.01, 1.0, 1.0], "jacobian_norm": [3.0, 1.0, 0.3, 0.2]})
    assert study_gradient_text.over_printed_bound(sweep) == "2 of 4"
    # review 17: a missing norm is not counted in "of N"
    holes = pl.concat([sweep, pl.DataFrame({"T": [1.0], "jacobian_norm": [float("nan")]})])
    assert study_gradient_text.over_printed_bound(holes) == "2 of 4"


def test_the_baseline_critical_n_is_set_against_the_paper_by_its_numbers():
    """Review (S4): the page said "far above the paper's approximately 0.06 L" whatever the
    baseline's N_crit / L was; the comparison now comes from its interval."""
    assert study_report.against_paper_share(0.4, 0.6).startswith("above the paper's")
    assert study_report.against_paper_share(0.01, 0.02).startswith("below the paper's")
    assert study_report.against_paper_share(0.05, 0.2).startswith("not apart from the paper's")
    # no interval (one seed): the point on both ends
    assert study_report.against_paper_share(math.nan, math.nan, 0.5).startswith("above")


def test_one_seeds_verdicts_withhold_what_the_caps_alone_give():
    """Review 10: the one-seed page read sparsemax's T ||J|| 0.4 (cap 1) against softmax's 0.2
    (cap 0.5) as "tightens"; over the seeds and on untrained weights that is withheld. The one
    measure per rule is now read the same way (study_seeds.capped_verdicts, which Study uses)."""
    measures = {
        "softmax": {"gradient_low_t": 0.2, "gradient_low_t_cap": 0.5},
        "sparsemax": {"gradient_low_t": 0.4, "gradient_low_t_cap": 1.0},
    }
    found = study_seeds.capped_verdicts(measures, "softmax", 1.5)
    assert found["sparsemax"]["gradient_low_t"] == study.CEILING
    import inspect

    assert "capped_verdicts(" in inspect.getsource(study_report.Study)


def test_what_leads_the_low_t_mean_is_read_from_every_temperature():
    """Reviews 9-12: the page said the mean is led by its largest T whatever the sweep showed,
    then read only the two ends. The means at every T are printed, with their shape, and the T
    giving the largest share is named: here T = 0.00316, in the middle, of a sweep that is not
    monotone (the review's mixture of sharp and near-uniform rows)."""
    means = {0.001: 0.084, 0.00316: 0.128, 0.01: 0.036, 0.0316: 0.023, 0.1: 0.048}
    mixed = pl.DataFrame({"T": list(means), "jacobian_norm": [c / t for t, c in means.items()]})
    fall = study_gradient_text.low_temperature_fall(mixed, "m")
    assert fall == (
        "m's mean T ||J|| at T = 0.1 / 0.0316 / 0.01 / 0.00316 / 0.001 is "
        "0.048 / 0.023 / 0.036 / 0.128 / 0.084 (it is not monotone as T falls)"
    )
    lead = study_gradient_text.low_temperature_lead(mixed)
    assert lead.startswith("the largest share of the mean comes from T = 0.00316 (40% of it")
    falling = pl.DataFrame({"T": [0.01, 0.1], "jacobian_norm": [2.5, 1.0]})
    assert "(it falls as T falls)" in study_gradient_text.low_temperature_fall(falling, "m")
    assert "T = 0.1, the largest such T (80%" in study_gradient_text.low_temperature_lead(falling)
    rising = pl.DataFrame({"T": [0.01, 0.1], "jacobian_norm": [40.0, 1.0]})
    assert "(it rises as T falls)" in study_gradient_text.low_temperature_fall(rising, "m")
    assert "T = 0.01, the smallest (80%" in study_gradient_text.low_temperature_lead(rising)
    zero = pl.DataFrame({"T": [0.01, 0.1], "jacobian_norm": [0.0, 0.0]})
    assert study_gradient_text.low_temperature_lead(zero).endswith("it is 0")
    # review 14: c / T at every T (the reference law) stays flat, and no T leads it
    flat = pl.DataFrame({"T": [0.001, 0.01, 0.1], "jacobian_norm": [250.0, 25.0, 2.5]})
    assert "(it stays flat as T falls)" in study_gradient_text.low_temperature_fall(flat, "m")
    assert study_gradient_text.low_temperature_lead(flat).startswith("no one temperature")
    assert "(it stays flat as T falls)" in study_gradient_text.low_temperature_fall(zero, "m")
    # review 15: a grid with one temperature at or below 0.1 (a user's) must not crash
    one = pl.DataFrame({"T": [0.1, 1.0, 10.0], "jacobian_norm": [3.0, 1.0, 0.1]})
    assert study_gradient_text.low_temperature_lead(one) == (
        "the sweep has one temperature at or below 0.1, T = 0.1"
    )
    # review 16: a missing norm is left out (not "nan" and "it is 0"); no low T is said so
    holes = pl.DataFrame(
        {"T": [0.001, 0.01, 0.01, 0.1], "jacobian_norm": [100.0, float("nan"), 20.0, 3.0]}
    )
    assert "is 0.3 / 0.2 / 0.1 (it falls as T falls)" in study_gradient_text.low_temperature_fall(
        holes, "m"
    )
    assert "T = 0.1, the largest such T" in study_gradient_text.low_temperature_lead(holes)
    high = pl.DataFrame({"T": [1.0, 10.0], "jacobian_norm": [0.1, 0.01]})
    assert (
        study_gradient_text.low_temperature_lead(high)
        == "the sweep has no temperature at or below 0.1"
    )
    assert "fewer than two temperatures" in study_gradient_text.low_temperature_fall(one, "m")


def test_the_study_pages_paper_band_is_the_claim_cards():
    """The band the study page sets the baseline's N_crit / L against is the claim card's
    approximate one (paper_claims.yaml), kept in sync by this test."""
    import yaml
    from project import REPO

    card = yaml.safe_load((REPO / "workflow/resources/paper_claims.yaml").read_text())
    approx = card["critical_n"]["rules"]["approx"]
    assert study_report.PAPER_BAND == (approx["low"], approx["high"])


def test_a_cell_the_caps_withhold_prints_its_cap_divided_p():
    """Review 12: a withheld low-T cell printed its raw "p = 0.00096", which read as a finding;
    review 42: it is a member of the family with its cap-divided p, and says so."""
    from attnlimits_workflow.assemble.study_prose import significance_text

    withheld = study_seeds.SeedMeasure(
        1.0, 0.5, 1.5, 3, study.CEILING, p_value=0.44, p_cap=0.44, p_own=0.00096
    )
    assert significance_text(withheld) == (
        "; p = 0.00096 on the ratio shown, 0.44 on T ||J|| / cap, the corrected family reading"
        " the larger"
    )
    kept = study_seeds.SeedMeasure(1.0, 0.5, 1.5, 3, study.TIGHTENS, p_value=0.00096)
    assert significance_text(kept).startswith("; p = 0.00096")
    # review 47: a cell shown by its own ratio whose family p is the cap-divided one printed
    # that p alone beside the ratio, as if it were the ratio's test
    shown = study_seeds.SeedMeasure(
        1.0, 0.5, 1.5, 3, study.NO_DIFFERENCE, p_value=0.871, sign_p=0.25, p_cap=0.871, p_own=0.125
    )
    assert significance_text(shown) == (
        "; p = 0.125 on the ratio shown, 0.871 on T ||J|| / cap; the family reads the larger,"
        " sign test p = 0.25"
    )
    # where the shown ratio's own p is the larger, it is the family's too: printed alone
    own = study_seeds.SeedMeasure(
        1.0, 0.5, 1.5, 3, study.NO_DIFFERENCE, p_value=0.6, sign_p=1.0, p_cap=0.2, p_own=0.6
    )
    assert significance_text(own) == "; p = 0.6, sign test p = 1"


def test_a_missing_cap_divides_neither_side():
    """Review 14: with the baseline's cap missing, one measure was divided and the other not,
    and the cell withheld; over the seeds the same cell stands. Neither side is divided now."""
    measures = {
        "softmax": {"gradient_low_t": 0.2, "gradient_low_t_cap": math.nan},
        "rule": {"gradient_low_t": 0.6, "gradient_low_t_cap": 4.0},
    }
    assert study_seeds.capped_verdicts(measures, "softmax", 1.5)["rule"]["gradient_low_t"] == (
        study.TIGHTENS
    )


def test_a_rule_with_no_known_jacobian_bound_has_no_cap_to_divide_by():
    """Review 47: raw Self-Adjust's T ||J|| grows without bound, and its "cap" was its sweep's
    largest value (308 to 1,525 across seeds): dividing by it reversed the comparison, and its
    cell was withheld as "its ceiling differs", a ceiling it does not have. A rule whose
    attnlimits.rules record has no jacobian_bound now keeps a NaN cap and its raw verdict."""
    import polars as pl

    from attnlimits import rules

    assert rules.get("self_adjust_softmax_raw").jacobian_bound is None
    assert rules.get("softmax").jacobian_bound is not None
    sweep = pl.DataFrame({"T": [0.01, 0.01, 1.0], "jacobian_norm": [30.0, 150.0, 1.0]})
    samples = pl.DataFrame({"L": [8, 16], "max_weight": [0.2, 0.1], "jacobian_norm": [0.1, 0.1]})
    critical = pl.DataFrame({"L": [8, 16], "N_crit": [2, 4]})
    separability = pl.DataFrame({"N": [4], "ratio": [0.5]})
    evaluation = {"contexts": [{"context": 8, "perplexity": 2.0, "tail_perplexity": 2.0}]}
    args = (samples, critical, separability, evaluation, sweep)
    assert study.limit_measures(*args)["gradient_low_t_cap"] == pytest.approx(1.5)
    unbounded = study.limit_measures(*args, jacobian_bounded=False)
    assert math.isnan(unbounded["gradient_low_t_cap"])
    # the verdict then reads the raw measures: 6x softmax's tightens, divided by nothing
    measures = {
        "softmax": {"gradient_low_t": 0.1, "gradient_low_t_cap": 0.5},
        "raw": {"gradient_low_t": 0.6, "gradient_low_t_cap": unbounded["gradient_low_t_cap"]},
    }
    assert study_seeds.capped_verdicts(measures, "softmax", 1.5)["raw"]["gradient_low_t"] == (
        study.TIGHTENS
    )


def test_one_seeds_critical_n_is_set_against_the_paper_by_both_ends():
    """Review 16: one seed's N_crit / L read only its lower end; with a censored length the upper
    end can lie inside the band, and "below" would have no grounds."""
    s = study_report.Study.__new__(study_report.Study)
    s.over_seeds, s.baseline, s.seeds = None, "softmax", [0]
    measure = {"distance": 0.01, "distance_upper": 0.5}
    assert study_report.baseline_against_paper(s, measure).startswith("not apart")
    assert study_report.baseline_against_paper(s, {"distance": 0.01}).startswith("below")
    # review 17: the workflow's one-seed page has over_seeds too (seed_measures of one seed)
    s.over_seeds = study_seeds.seed_measures({"softmax": [measure]}, "softmax", 1.5, 0.95)
    assert study_report.baseline_against_paper(s, measure).startswith("not apart")


def test_the_gradient_row_reads_the_headers_temperatures_and_survives_nan():
    """Review 18: dropping a temperature whose norms are all NaN printed the next temperature's
    median under its header, and a model with no finite norm crashed the page."""
    s = study_report.Study.__new__(study_report.Study)
    sweep = pl.DataFrame(
        {
            "T": [0.01, 0.01, 1.0, 1.0, 100.0, 100.0],
            "jacobian_norm": [float("nan"), float("nan"), 0.3, 0.2, 0.001, 0.002],
            "bound": [50.0, 50.0, 0.5, 0.5, 0.005, 0.005],
            "violated": [False] * 6,
            "not_testable": [False] * 6,
        }
    )
    empty = sweep.with_columns(pl.lit(float("nan")).alias("jacobian_norm"))
    s.names, s.gradient = ["a", "b"], {"a": sweep, "b": empty}
    assert study_gradient_text.gradient_row(s, "a")[1] == "n/a / 0.25 / 0.0015"
    row = study_gradient_text.gradient_row(s, "b")
    assert row[1] == "n/a / n/a / n/a" and row[2] == "n/a"
    # an infinite norm exceeds the printed bound and is counted (only NaN is left out)
    inf = pl.DataFrame({"T": [1.0, 1.0], "jacobian_norm": [float("inf"), 0.1]})
    assert study_gradient_text.over_printed_bound(inf) == "1 of 2"
    # one ulp between two means is no step (review 18)
    ulp = pl.DataFrame(
        {"T": [0.0001, 0.001, 0.01], "jacobian_norm": [2500.0000000000005, 250.0, 35.0]}
    )
    assert "(it falls as T falls)" in study_gradient_text.low_temperature_fall(ulp, "m")


def test_the_gradient_header_names_only_the_temperatures_of_the_grid():
    """The header said "T = first / 1 / last" on a grid without T = 1, over a "-" in each row."""
    sweep = pl.DataFrame(
        {
            "T": [0.01, 0.01, 100.0, 100.0],
            "jacobian_norm": [3.0, 5.0, 0.001, 0.002],
            "bound": [50.0, 50.0, 0.005, 0.005],
            "violated": [False] * 4,
            "not_testable": [False] * 4,
        }
    )
    assert study_gradient_text.shown_temperatures([0.01, 100.0]) == [0.01, 100.0]
    assert study_gradient_text.shown_temperatures([0.01, 1.0, 100.0]) == [0.01, 1.0, 100.0]
    assert study_gradient_text.gradient_header([0.01, 100.0]) == "median ||J|| at T = 0.01 / 100"
    assert (
        study_gradient_text.gradient_header([0.01, 1, 100.0])
        == "median ||J|| at T = 0.01 / 1 / 100"
    )
    s = study_report.Study.__new__(study_report.Study)
    s.names, s.gradient = ["a"], {"a": sweep}
    assert study_gradient_text.gradient_row(s, "a")[1] == "4 / 0.0015"


def test_review_19_denominators_and_steps():
    """Review 19: the rule's bound check counted missing norms in "of N"; a rise from 1e-12 to
    2e-10 was zeroed by a tolerance scaled to the largest mean and read "falls"."""
    g = pl.DataFrame(
        {
            "T": [0.01, 0.01, 1.0, 1.0],
            "jacobian_norm": [float("nan"), float("nan"), 0.3, 0.2],
            "bound": [50.0, 50.0, 0.5, 0.5],
            "violated": [False] * 4,
            "not_testable": [False] * 4,
        }
    )
    assert study_gradient_text.bound_check(g)[0] == "0 of 2 (row, T) above it"
    means = {0.1: 0.35, 0.01: 1e-12, 0.001: 2e-10}
    rise = pl.DataFrame({"T": list(means), "jacobian_norm": [c / t for t, c in means.items()]})
    assert "(it is not monotone as T falls)" in study_gradient_text.low_temperature_fall(rise, "m")
    inf = pl.DataFrame({"T": [0.01, 0.1], "jacobian_norm": [float("inf"), 3.0]})
    assert study_gradient_text.low_temperature_fall(inf, "m").endswith("(infinite at some T)")


def test_review_20_infinities_and_no_outcome_samples():
    """Review 20: an infinite mean printed "nan%"; an infinite ||J|| held its bound within an
    infinite tolerance; the per-N text counted samples with no outcome."""
    from attnlimits.checks import HOLDS, VIOLATED, check_bound
    from attnlimits_workflow.assemble.summaries import by_n

    inf = pl.DataFrame({"T": [0.01, 0.1], "jacobian_norm": [float("inf"), 3.0]})
    assert study_gradient_text.low_temperature_lead(inf) == (
        "the mean is infinite at T = 0.01: no share can be read"
    )
    got = check_bound(
        np.array([np.inf, 100.0, 0.1]), np.array([0.5, 0.5, 0.5]), upper=True, rtol=1e-9
    )
    assert list(got) == [VIOLATED, VIOLATED, HOLDS]
    frame = pl.DataFrame(
        {"N": [2, 2, 2, 2, 2], "x_check": [VIOLATED, None, None, HOLDS, "not testable"]},
    )
    # review 21: the denominator is the samples that could fail, as count() has it
    assert by_n(frame, "x_check") == "N=2: 1 of 2 samples (0 vacuous, 1 not testable)"
    empty = pl.DataFrame({"N": [2, 2], "x_check": [None, None]})
    assert by_n(empty, "x_check") == "N=2: 0 of 0 samples (0 vacuous, 0 not testable)"


def test_the_study_figures_medians_leave_nan_out():
    """Panel (d) and the panels against L took polars' median over NaN norms, which sorts NaN
    above every number: two NaN of three rows gave NaN, one of three the larger finite value."""
    frame = pl.DataFrame(
        {
            "T": [0.01, 0.01, 0.01, 1.0, 1.0, 1.0],
            "jacobian_norm": [float("nan"), float("nan"), 2.0, float("nan"), 1.0, 3.0],
            "bound": [5.0] * 6,
        }
    )
    got = study_figure.medians(frame, "T", "jacobian_norm", pl.col("bound").max())
    assert got["T"].to_list() == [0.01, 1.0]
    assert got["jacobian_norm"].to_list() == [2.0, 2.0]
    assert got["bound"].to_list() == [5.0, 5.0]


def test_the_printed_bound_count_uses_the_checks_tolerance():
    """over_printed_bound counted a norm one rounding above min{1/(4T), sqrt 2} as over it,
    where every other bound check of the study (check_bound, RTOL_FLOAT64) reads it as holding."""
    from attnlimits.gradient import corollary3_bound

    t = np.array([1.0, 1.0, 0.01])
    bound = corollary3_bound(t)
    g = pl.DataFrame({"T": t, "jacobian_norm": [bound[0] * (1 + 1e-12), bound[1] * 1.01, 0.1]})
    assert study_gradient_text.over_printed_bound(g) == "1 of 3"


def test_the_low_temperature_sentence_says_it_reads_one_seed():
    """The sentence read the first seed's sweep only, without saying so on a study of several."""
    g = pl.DataFrame({"T": [0.001, 0.01, 0.1], "jacobian_norm": [300.0, 40.0, 5.0]})
    assert study_gradient_text.low_temperature_fall(g, "softmax", 0).startswith(
        "softmax's mean T ||J|| on seed 0 alone at T = 0.1 / 0.01 / 0.001"
    )
    assert study_gradient_text.low_temperature_fall(g, "softmax").startswith(
        "softmax's mean T ||J||"
    )


def test_untrained_length_points_that_cannot_differ_are_said_to_carry_nothing():
    """Review 47: every untrained length ratio was 0.998-0.9998, so every untrained length
    cell read 'within 1.5x' by construction."""
    flat = stub_study(
        {
            "softmax": {"length": study_seeds.Untrained(1.0, "baseline")},
            "a": {"length": study_seeds.Untrained(0.998, study.NO_CHANGE)},
            "b": {"length": study_seeds.Untrained(1.0002, study.NO_CHANGE)},
        }
    )
    assert study_report.untrained_length_note(flat) == (
        "- The untrained length cells read x0.9980 to x1.0002: an untrained model's perplexity hardly"
        " moves with the context, whatever its rule, so those points carry no information on the"
        " rule."
    )
    flat.untrained["b"]["length"] = study_seeds.Untrained(1.2, study.NO_CHANGE)
    assert study_report.untrained_length_note(flat) == ""
    assert study_report.untrained_length_note(stub_study(None)) == ""
