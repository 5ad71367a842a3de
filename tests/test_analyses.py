"""The analyses (attnlimits_workflow.analyses) on tiny hand-made packs, without Snakemake: each
protocol's table against values worked out by hand from the paper's formulas."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from attnlimits import distance as dist
from attnlimits import reference
from attnlimits.checks import HOLDS, NOT_TESTABLE, VACUOUS, VIOLATED
from attnlimits.critical import ks_test
from attnlimits_workflow.analyses import (
    critical_n,
    distance,
    gradient,
    heads,
    normalizer,
    separability,
    study_gradient,
    vanishing,
)
from attnlimits_workflow.analyses.common import settings_from
from attnlimits_workflow.packs import Pack

pytestmark = pytest.mark.unit

ALL_ROWS = {
    "chunks": None,
    "masked": "non_selected",
    "mc_draws": 4,
    "mc_rows": 256,
    "critical_n_fractions": [0.5, 0.99],
    "critical_n_band_edges": [],
}
FRACTIONS, EDGES = ALL_ROWS["critical_n_fractions"], ALL_ROWS["critical_n_band_edges"]
# x of the distance cases: three 1-d tokens 2, 1, -1
X_LINE = [[2.0], [1.0], [-1.0]]
# x of the separability cases: three unit vectors, delta = sqrt 2
X_CIRCLE = [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]


def make_pack(
    weights,
    x,
    *,
    logits=None,
    layer=None,
    chunk=None,
    head=None,
    rows: bool = False,
    causal: bool = False,
    query_norm=None,
    key_norm_max=None,
) -> Pack:
    """A pack of S samples of L keys, weights (S, L), x (S, L, d) or one (L, d) for every sample.
    ``rows``: q/k rows for the all-rows protocol whose queries are 0, so that every row's
    attention is uniform over its visible keys."""
    weights = np.atleast_2d(np.asarray(weights, dtype=np.float32))
    S, L = weights.shape
    x = np.asarray(x, dtype=np.float32)
    x = np.broadcast_to(x, (S, *x.shape[-2:])).copy()
    index = np.arange(S)
    return Pack(
        length=L,
        layer=np.zeros(S, dtype=np.int64) if layer is None else np.asarray(layer),
        chunk=index if chunk is None else np.asarray(chunk),
        head=np.zeros(S, dtype=np.int64) if head is None else np.asarray(head),
        weights=weights,
        logits=np.log(weights) if logits is None else np.atleast_2d(np.asarray(logits)),
        x=x,
        query_norm=np.ones(S) if query_norm is None else np.asarray(query_norm),
        key_norm_max=np.ones(S) if key_norm_max is None else np.asarray(key_norm_max),
        score_scale=np.ones(S),
        metadata={"causal": causal, "softcap": None},
        q_rows=np.zeros((S, L, 2)) if rows else None,
        k_rows=np.random.default_rng(0).standard_normal((S, L, 2)) if rows else None,
    )


def distance_settings(protocol: str) -> distance.Settings:
    return distance.Settings(
        mc_draws=64,
        mc_strata=1,
        mc_max_draws=64,
        mc_target_rel_stderr=0.05,
        seed=3,
        protocol=protocol,
        all_rows=ALL_ROWS,
        zero_weight="not_selected",
    )


class TestDistance:
    def test_last_row_hand_case(self):
        """alpha = (0.5, 0.3, 0.2), x = (2, 1, -1), N = 1: s = 1, d~ = 0.7 + 1.2; fixed-set
        bound (1 - 0.5) 3 + 2 (0.5 * 2 - 0.5); term 2/3 (0.9 + 0.3 + 1.8) with xbar = 1.1; the
        exact E is the mean of the three one-token sets' d~ (1.9, 1.2, 1.7) = 1.6 < term, so the
        one-sided epsilon check cannot fail: vacuous."""
        pack = make_pack([0.5, 0.3, 0.2], X_LINE)
        table = distance.last_row(pack, 1, distance_settings("last_row"))
        row = table.row(0, named=True)
        assert (row["layer"], row["chunk"], row["head"], row["L"], row["N"]) == (0, 0, 0, 3, 1)
        assert row["distance"] == pytest.approx(1.9, rel=1e-6)
        assert row["upper_bound"] == pytest.approx(2.5, rel=1e-6)
        assert row["expectation_term"] == pytest.approx(2.0, rel=1e-6)
        # c = 1/2: sum over i of sum_{j != i} a_j^2 x_j^2 / |a_i x_i - c sum_{j != i} a_j x_j|
        eps = (0.13 / 0.95 + 1.04 / 0.1 + 1.09 / 0.85) * 0.5 * (2 / 3) * 0.5
        assert row["epsilon_bound"] == pytest.approx(eps, rel=1e-6)
        assert 1.2 - 1e-6 <= row["mc_expectation"] <= 1.9 + 1e-6
        assert abs(row["mc_expectation"] - 1.6) <= 5 * row["mc_stderr"] + 1e-9
        assert row["selected_mass"] == pytest.approx(0.5, rel=1e-6)
        assert (row["upper_bound_check"], row["epsilon_bound_check"]) == (HOLDS, VACUOUS)

    def test_all_rows_hand_case(self):
        """Uniform rows over x = (2, 1, -1), N = 1 (ties to key 0): every row has s = 2/3,
        d~ = 1/3 + 1 = 4/3, fixed-set bound (2/3) 3 + 2 (2/3 - 2/3) = 2, term
        (2/3)(1 + 1/6 + 3/2) = 16/9; the one-token sets' d~ are 4/3, 1, 5/3."""
        pack = make_pack([[1 / 3] * 3, [1 / 3] * 3], X_LINE, rows=True, chunk=[0, 1])
        table = distance.all_rows(pack, 1, distance_settings("all_rows"))
        assert table.height == 1  # two chunks of one (layer, head)
        row = table.row(0, named=True)
        assert (row["chunk"], row["rows"], row["chunks"]) == (-1, 6, 2)
        assert row["distance"] == pytest.approx(4 / 3, rel=1e-6)
        assert row["upper_bound"] == pytest.approx(2.0, rel=1e-6)
        assert row["expectation_term"] == pytest.approx(16 / 9, rel=1e-6)
        assert row["expectation_term_mc_rows"] == pytest.approx(16 / 9, rel=1e-6)
        assert 1.0 - 1e-6 <= row["mc_expectation"] <= 5 / 3 + 1e-6
        assert row["mc_draws_used"] == 6 * ALL_ROWS["mc_draws"]
        assert row["upper_bound_check"] == HOLDS and row["upper_bound_violated_rows"] == 0
        # an encoder reads its rows the same both ways
        assert row["distance_other_masked"] == row["distance"]

    def test_all_rows_epsilon_check_reads_the_drawn_rows_and_their_own_mc_error(self):
        """Review finding 10. Three rows over x = (2, 1, -1), N = 1, two chunks: rows 0 and 1
        attend uniformly, row 2 puts e^6 / (e^6 + 2) on key 0. (a) With mc_rows = 1 only the last
        row is drawn, so E must be held against that row's term and bound, not the mean over all
        three rows. (b) With every row drawn, the standard error of the head's E is each row's
        Monte-Carlo error, sqrt(mean_r Var_r / D / R), Var_r the variance of d~ over the three
        equally likely one-token sets, and not the spread between rows' d~ pooled into it."""
        pack = make_pack([[1 / 3] * 3, [1 / 3] * 3], X_LINE, rows=True, chunk=[0, 1])
        q = np.zeros((2, 3, 2))
        q[:, 2, 0] = 6.0  # row 2's logits (6, 0, 0); rows 0 and 1: (0, 0, 0)
        k = np.zeros((2, 3, 2))
        k[:, 0, 0] = 1.0
        pack = dataclasses.replace(pack, q_rows=q, k_rows=k)
        x = np.asarray(X_LINE)
        peaked = np.exp([6.0, 0.0, 0.0]) / np.exp([6.0, 0.0, 0.0]).sum()
        row_weights = [np.full(3, 1 / 3), np.full(3, 1 / 3), peaked]
        terms = [reference.expectation_term(w, x, 1) for w in row_weights]
        bounds = [reference.epsilon_bound(w, x, 1) for w in row_weights]
        assert abs(terms[2] - np.mean(terms)) > 0.3  # the two readings are far apart

        last = dict(ALL_ROWS, mc_rows=1, mc_draws=50)
        row = distance.all_rows(
            pack, 1, dataclasses.replace(distance_settings("all_rows"), all_rows=last)
        ).row(0, named=True)
        assert row["expectation_term"] == pytest.approx(np.mean(terms), rel=1e-9)
        assert row["expectation_term_mc_rows"] == pytest.approx(terms[2], rel=1e-9)
        assert row["epsilon_bound_mc_rows"] == pytest.approx(bounds[2], rel=1e-9)
        assert row["mc_draws_used"] == 2 * 50  # one drawn row per chunk
        assert row["epsilon_bound_rows"] == 2  # the check's means are over these rows

        # (b) N = 2, row r nearly one-hot on key r (q_r = 4 e_r, k_j = e_j): each row's d~ barely
        # moves between its three 2-sets, but the rows' d~ differ (about 2, 1 and 1)
        draws = 400
        pack = dataclasses.replace(
            pack,
            q_rows=np.broadcast_to(4.0 * np.eye(3), (2, 3, 3)),
            k_rows=np.tile(np.eye(3), (2, 1, 1)),
        )
        row_weights = [
            np.exp(4.0 * np.eye(3)[r]) / np.exp(4.0 * np.eye(3)[r]).sum() for r in range(3)
        ]
        sets = [
            [reference.distance(w, x, list(two)) for two in itertools.combinations(range(3), 2)]
            for w in row_weights
        ]
        within = np.sqrt(np.mean([np.var(d) for d in sets]) / draws / 6)
        pooled = np.sqrt(np.var(np.concatenate(sets * 2)) / draws / 6)  # between rows as well
        assert pooled > 10 * within  # the case tells the two apart
        every = dict(ALL_ROWS, mc_rows=256, mc_draws=draws)
        row = distance.all_rows(
            pack, 2, dataclasses.replace(distance_settings("all_rows"), all_rows=every)
        ).row(0, named=True)
        assert 0.75 * within < row["mc_stderr"] < 1.3 * within

    @pytest.mark.parametrize(
        "mc, term, bound, stderr, want",
        [
            (3.0, 1.0, 1.5, 0.1, VIOLATED),  # 3 - 1 - 0.3 = 1.7 > 1.5
            (3.0, 1.0, 1.5, 0.2, HOLDS),  # 3 - 1 - 0.6 = 1.4
            (1.0, 1.0, 0.1, 0.0, VACUOUS),  # E = term: no bound >= 0 can fail
            (2.0, 1.0, np.inf, 0.0, VACUOUS),
            # 3 s.e. = 3 >= the bound 0.1: a residual of 3.05, 30x the bound, would pass
            (4.05, 1.0, 0.1, 1.0, NOT_TESTABLE),
            # a positive residual 0.5 hidden by 3 s.e. = 0.6: not vacuous, not testable
            (1.5, 1.0, 1.0, 0.2, NOT_TESTABLE),
            (0.9, 1.0, 1.0, 0.2, VACUOUS),  # the term above E: vacuous whatever the noise
        ],
    )
    def test_the_one_epsilon_check(self, mc, term, bound, stderr, want):
        got = distance.epsilon_bound_check([mc], [term], [bound], [stderr])
        assert got == [want]


def separability_settings(protocol: str, delta_over: str = "context") -> separability.Settings:
    return separability.Settings(
        radius=1.0,
        delta_over=delta_over,
        protocol=protocol,
        all_rows=ALL_ROWS,
        zero_weight="not_selected",
        seed=0,
    )


class TestSeparability:
    def test_last_row_hand_case(self):
        """alpha = (0.6, 0.3, 0.1) on unit vectors e1, e2, -e1, N = 2: s = (0.6, 0.3),
        r = |s + 0.1 e1| = sqrt 0.58, both selected tokens within r (0.3, 0.6): N_s/N = 1;
        xi = (0.3, 0.6), delta = sqrt 2 of the two selected."""
        pack = make_pack([0.6, 0.3, 0.1], X_CIRCLE)
        table = separability.analyse(pack, 2, separability_settings("last_row", "selected"))
        row = table.row(0, named=True)
        r = math.sqrt(0.58)
        assert row["delta"] == pytest.approx(math.sqrt(2), rel=1e-6)
        assert row["radius"] == pytest.approx(r, rel=1e-6)
        assert (row["n_distinguishable"], row["ratio"]) == (2, 1.0)
        assert row["lower_bound"] == pytest.approx(1 - 0.9 / (2 * r), rel=1e-6)
        upper = (math.exp(-((r - 0.3) ** 2) / 16) + math.exp(-((r - 0.6) ** 2) / 16)) / 2
        assert row["upper_bound"] == pytest.approx(upper, rel=1e-6)
        # N_s/N = 1 passes any lower bound (vacuous) and exceeds this upper bound
        assert (row["lower_bound_check"], row["upper_bound_check"]) == (VACUOUS, VIOLATED)

    def test_context_delta_is_read_and_a_reordered_table_refused(self):
        pack = make_pack([[0.6, 0.3, 0.1]] * 2, X_CIRCLE)
        keys = {"layer": [0, 0], "chunk": [0, 1], "head": [0, 0]}
        table = pl.DataFrame({**keys, "delta": [0.25, 0.5]})
        got = separability.analyse(
            pack, 2, separability_settings("last_row"), separation=table, source="t.parquet"
        )
        assert got["delta"].to_list() == [0.25, 0.5]
        with pytest.raises(SystemExit, match="t.parquet: sample order differs"):
            separability.analyse(
                pack,
                2,
                separability_settings("last_row"),
                separation=table.reverse(),
                source="t.parquet",
            )

    def test_all_rows_hand_case(self):
        """Uniform rows over e1, e2, -e1, N = 1 (key 0): s = e1/3, r = min(sqrt 2, 2)/3, N_s/N = 1,
        lower bound 1 (xi = 0), upper bound exp(-r^2/16) < 1: every row violates it."""
        pack = make_pack([1 / 3] * 3, X_CIRCLE, rows=True)
        settings = separability_settings("all_rows")
        table = separability.all_rows(pack, 1, settings, np.array([math.sqrt(2)]))
        row = table.row(0, named=True)
        assert (row["chunk"], row["rows"], row["ratio"], row["lower_bound"]) == (-1, 3, 1.0, 1.0)
        assert row["upper_bound"] == pytest.approx(math.exp(-(2 / 9) / 16), rel=1e-6)
        assert (row["upper_bound_check"], row["upper_bound_violated_rows"]) == (VIOLATED, 3)
        assert (row["lower_bound_check"], row["lower_bound_vacuous_rows"]) == (VACUOUS, 3)
        assert row["mask_only_rows"] == 0

    def test_a_proved_lower_bound_is_vacuous_and_the_readings_shortfall_named(self):
        """Reviews 43-44: the per-sample lower bound holds by proof on non-negative weights
        under Eq. (10)'s count, yet its check read "holds", and 0 of 144 such heads made Table 1
        say "reproduced" on data that could not fail it; counting only the rows where
        not_selected leaves a negligible weight out decided them by rounding. Every row is now
        vacuous; sample 1's second top-N weight (5e-8 of its peak) is left out, and were its
        N_s/N to fall below, the page would name it, not count it."""
        from attnlimits_workflow.assemble.claims import Scorecard
        from attnlimits_workflow.assemble.table1 import bound_claims

        pack = make_pack([[0.6, 0.3, 0.1], [1.0, 5e-8, 4e-8]], X_CIRCLE)
        table = separability.analyse(pack, 2, separability_settings("last_row"))
        assert table["lower_bound_open"].to_list() == [False, False]
        assert table["negligible_left_out"].to_list() == [False, True]
        assert table["lower_bound_check"].to_list() == [VACUOUS, VACUOUS]
        violations = separability.summarise_inputs(table)["violations"]
        card = Scorecard({})
        bound_claims(card, violations, literal_zero_weight=False)
        verdicts = {r["claim"]: r["verdict"] for r in card.rows}
        assert verdicts["bound holds: Theorem 2 lower bound, per-sample N_s/N (N >= 2)"] == (
            "vacuous"
        )
        assert verdicts["bound holds: Theorem 2 lower bound on mean N_s/N"] == "vacuous"
        # a shortfall of the reading is named beside the check
        named = table.with_columns(lower_bound_reading_violated=pl.Series([0.0, 1.0]))
        rows = separability.summarise_inputs(named)["violations"]
        note = rows.filter(pl.col("bound").str.contains("per-sample N_s/N \\(N >= 2\\)"))
        assert note["note"][0].startswith("1 rows fall below it under analysis.zero_weight")

    def test_all_rows_lower_bound_is_vacuous_on_rows_it_is_proved_on(self):
        """Review 43 on the row engine: uniform rows over three keys at N = 2 hold no negligible
        top-N weight, so each row's lower bound holds by proof: vacuous, none open."""
        pack = make_pack([1 / 3] * 3, X_CIRCLE, rows=True)
        settings = separability_settings("all_rows")
        row = separability.all_rows(pack, 2, settings, np.array([math.sqrt(2)])).row(0, named=True)
        assert (row["lower_bound_vacuous_rows"], row["lower_bound_rows"]) == (3, 3)
        assert (row["lower_bound_open"], row["lower_bound_check"]) == (0, VACUOUS)
        assert row["lower_bound_reading_violated"] == 0

    def test_all_rows_causal_rows_set_by_the_mask_are_left_out_of_the_checks(self):
        """Causal rows under non_selected: row 0 (t + 1 <= N = 1) selects its one visible key
        and its bounds are made by the two masked keys, so it keeps its N_s/N but is not
        counted in either check; rows 1 and 2 are."""
        pack = make_pack([1 / 3] * 3, X_CIRCLE, rows=True, causal=True)
        settings = separability_settings("all_rows")
        row = separability.all_rows(pack, 1, settings, np.array([math.sqrt(2)])).row(0, named=True)
        assert (row["rows"], row["mask_only_rows"]) == (3, 1)
        assert (row["upper_bound_rows"], row["lower_bound_rows"]) == (2, 2)
        assert row["ratio"] == 1.0  # N = 1: the one selected token is always distinguishable


def gradient_settings(protocol: str, temperature_on: str = "model_logits") -> gradient.Settings:
    return gradient.Settings(
        epsilons=[0.001, 0.1],
        directions=3,
        null_rows=256,
        temperature_on=temperature_on,
        seed=1,
        protocol=protocol,
        all_rows=ALL_ROWS,
    )


class TestGradient:
    def test_last_row_two_way_tie(self):
        """A two-way tie: ||J|| = 1/(2T), twice Corollary 3's 1/(4T) (violated) and equal to
        the Gershgorin bound, which no data can exceed (vacuous); g <= ||J||."""
        pack = make_pack([[0.5, 0.5]] * 2, [[1.0], [2.0]])
        table = gradient.last_row(pack, 2.0, gradient_settings("last_row"))
        assert table.height == 2 * 2  # samples x epsilons
        assert table["jacobian_norm"].to_list() == pytest.approx([0.25] * 4)
        assert table["paper_bound"].to_list() == pytest.approx([0.125] * 4)
        assert set(table["jacobian_paper_check"]) == {VIOLATED}
        assert set(table["jacobian_gershgorin_check"]) == {VACUOUS}
        assert (table["g_max"] <= 0.25 + 1e-6).all()
        assert set(table["eps"]) == {0.001, 0.1}

    def test_raw_scores_divide_the_logits_by_the_models_scale(self):
        """Under raw_scores T divides q.k = logits / scale: logits l of scale 0.5 at T are the
        raw scores 2 l at T."""
        pack = make_pack([[0.5, 0.5]], [[1.0], [2.0]], logits=[[0.0, 1.0]])
        pack.score_scale = np.array([0.5])
        raw = gradient.last_row(pack, 1.0, gradient_settings("last_row", "raw_scores"))
        pack.logits, pack.score_scale = np.array([[0.0, 2.0]]), np.array([1.0])
        doubled = gradient.last_row(pack, 1.0, gradient_settings("last_row"))
        a = 1 / (1 + math.e**2)  # softmax(0, 2): two weights a, 1 - a; ||J|| = 2 a (1 - a)
        assert doubled["jacobian_norm"].to_list() == pytest.approx([2 * a * (1 - a)] * 2)
        assert raw["jacobian_norm"].to_list() == pytest.approx(doubled["jacobian_norm"].to_list())

    def test_all_rows_raw_scores_divide_each_head_by_its_own_scale(self):
        """Heads whose scales differ (GPT-2's scale_attn_by_inverse_layer_idx): under
        raw_scores each head's logits scale q.k are divided by that head's scale, so the table
        equals the model-logits one of the same q and k at scale 1."""
        rng = np.random.default_rng(1)

        def pack_with(scales):
            pack = make_pack([[0.25] * 4] * 2, rng.standard_normal((4, 2)), rows=True)
            pack.q_rows = np.random.default_rng(2).standard_normal((2, 4, 2)) * 3
            pack.score_scale = np.asarray(scales, dtype=float)
            return pack

        raw = gradient.all_rows(
            pack_with([0.5, 0.25]), 1.0, gradient_settings("all_rows", "raw_scores")
        )
        plain = gradient.all_rows(pack_with([1.0, 1.0]), 1.0, gradient_settings("all_rows"))
        assert raw["jacobian_norm"].to_list() == pytest.approx(plain["jacobian_norm"].to_list())

    def test_all_rows_uniform_rows(self):
        """Uniform rows over 2 keys: ||J|| = 1/(2T) on every row; rows with fewer than 4
        visible keys are left out of the wide-row check (no such row: None)."""
        pack = make_pack([0.5, 0.5], [[1.0], [2.0]], rows=True)
        table = gradient.all_rows(pack, 1.0, gradient_settings("all_rows"))
        assert table.height == 2  # one head x two epsilons
        row = table.row(0, named=True)
        assert (row["chunk"], row["rows"]) == (-1, 2)
        assert row["jacobian_norm"] == pytest.approx(0.5)
        assert row["g_max"] == row["g_mean"] <= 0.5 + 1e-6
        assert (row["jacobian_paper_check"], row["jacobian_gershgorin_check"]) == (
            VIOLATED,
            VACUOUS,
        )
        assert row["jacobian_paper_wide_check"] is None


def critical_settings(protocol: str) -> critical_n.Settings:
    return critical_n.Settings(
        ks_alpha=0.01,
        mc_draws=2,
        cache_mb=1,
        samples=None,
        d_fractions=[0.5],
        seed=2,
        protocol=protocol,
        all_rows=ALL_ROWS,
        zero_weight="not_selected",
    )


class TestCriticalN:
    """x = 0: d~ and both expectations are 0 at every N, so the KS test passes at N = 1 with
    D = 0 and p = 1."""

    def test_last_row_passes_at_the_lists_first_n(self):
        pack = make_pack(np.full((10, 6), 1 / 6), np.zeros((6, 2)))
        table = critical_n.last_row(pack, critical_settings("last_row"))
        assert set(table["expectation"]) == set(critical_n.KINDS)
        # Algorithm 3 walks N = 0.5 L, 0.99 L (analysis.all_rows.critical_n_fractions), as the
        # all-rows protocol does
        search = table.filter(pl.col("step") == "search")
        assert search["N"].to_list() == [3, 3] and search["p_value"].to_list() == [1.0, 1.0]
        fixed = table.filter(pl.col("step") == "fixed_fraction")
        assert fixed["N"].to_list() == [3, 3] and fixed["ks_statistic"].to_list() == [0.0, 0.0]
        assert set(table["N_crit"]) == {3} and not table["censored"].any()
        assert set(table["masked"]) == {"both"} and set(table["ks_samples"]) == {10}

    def test_last_row_walks_the_list_and_finds_a_pass_between_two_failing_ends(self):
        """Review 22: the last-row search tried N = 1 and N = L - 1 and, both rejecting, called
        the length censored ("no pass up to N = L - 1"), though against Theorem 1.2's term the
        KS test passes in a window between them (here N = 2..15 at L = 32). Algorithm 3 walks
        its increasing N list and returns the first N that passes."""
        S, d, L = 64, 8, 32
        rng = np.random.default_rng(1)
        sink, sigma, mean_scale = rng.uniform(0, 6), rng.uniform(0.5, 3), rng.uniform(0, 2)
        logits = rng.normal(0, sigma, (S, L))
        logits[:, 0] += sink
        w = np.exp(logits - logits.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        x = rng.normal(0, 1, (S, L, d)) + rng.normal(0, mean_scale, d)
        pack = make_pack(w, x)
        # brute force over every N: rejects at both ends, passes in a window
        weighted = dist.weighted(pack.weights, pack.x)
        p = {
            n: ks_test(
                dist.distance_to_context(weighted, n=n), dist.expectation_term(weighted, n=n)
            ).pvalue
            for n in range(1, L)
        }
        assert p[1] < 0.01 and p[L - 1] < 0.01 and p[3] >= 0.01
        rows = {**ALL_ROWS, "critical_n_fractions": [0.1, 0.25, 0.5, 0.99]}
        settings = dataclasses.replace(critical_settings("last_row"), all_rows=rows)
        table = critical_n.last_row(pack, settings)
        closed = table.filter(pl.col("expectation") == "closed_form")
        assert closed["N_crit"].unique().to_list() == [3]
        assert not closed["censored"].any()
        search = closed.filter(pl.col("step") == "search")
        assert search["N"].to_list() == [3]  # the list is [3, 8, 16, 31]; 3 passes first
        assert search["p_value"][0] == pytest.approx(p[3], rel=1e-9)
        walked = table.filter(
            (pl.col("expectation") == "monte_carlo") & (pl.col("step") == "search")
        )
        assert walked["N"].to_list() == [3, 8, 16, 31][: walked.height]

    def test_all_rows_passes_at_one(self):
        pack = make_pack(np.full((10, 6), 1 / 6), np.zeros((6, 2)), rows=True, head=np.arange(10))
        table = critical_n.all_rows(pack, critical_settings("all_rows"))
        assert set(table["masked"]) == {"both"}  # an encoder: one reading
        # Algorithm 3 searches N = 0.5 L, 0.99 L (analysis.all_rows.critical_n_fractions)
        search = table.filter(pl.col("step") == "search")
        assert search["N"].to_list() == [3, 3] and search["p_value"].to_list() == [1.0, 1.0]
        assert set(table["N_crit"]) == {3} and not table["censored"].any()
        fixed = table.filter(pl.col("step") == "fixed_fraction")
        assert fixed["ks_statistic"].to_list() == [0.0, 0.0]

    @pytest.mark.parametrize("protocol", ["last_row", "all_rows"])
    def test_bootstrap_replicates_rerun_the_search(self, protocol):
        # x = 0: every resample passes where the search on all units does; the point rows are
        # those of a run without bootstrap, the replicates rows of their own below them
        rows = {"rows": True, "head": np.arange(10)} if protocol == "all_rows" else {}
        pack = make_pack(np.full((10, 6), 1 / 6), np.zeros((6, 2)), **rows)
        plain = critical_n.analyse(pack, critical_settings(protocol))
        settings = dataclasses.replace(
            critical_settings(protocol), bootstrap={"resamples": 3, "seed": 0}
        )
        table = critical_n.analyse(pack, settings)
        assert table.filter(pl.col("step") != "replicate").equals(plain)
        assert plain["replicate"].is_null().all()
        reps = table.filter(pl.col("step") == "replicate")
        assert reps.height == 3 * len(critical_n.KINDS)
        assert sorted(reps["replicate"].to_list()) == [0, 0, 1, 1, 2, 2]
        assert set(reps["N_crit"]) == {3} and not reps["censored"].any()
        assert set(reps["top_N"]) == {3}


@pytest.mark.parametrize("protocol", ["last_row", "all_rows"])
def test_the_layer_bootstrap_draws_whole_layers_for_the_critical_n(protocol):
    """analysis.bootstrap.unit: layer: the critical N's resamples draw the units' layers whole
    (attnlimits.bootstrap.cluster_indices) from the same generator as the summaries' draws."""
    layer = np.repeat([0, 1], 5)
    rows = {"rows": True, "head": np.arange(10) % 5} if protocol == "all_rows" else {}
    pack = make_pack(np.full((10, 6), 1 / 6), np.zeros((6, 2)), layer=layer, **rows)
    settings = dataclasses.replace(
        critical_settings(protocol), bootstrap={"resamples": 4, "seed": 7, "unit": "layer"}
    )
    draws = critical_n.unit_draws(layer, settings)
    assert draws.shape == (4, 10)
    for row in draws:  # each resample: two drawn layers, five units each, whole
        assert sorted(np.bincount(layer[row], minlength=2).tolist()) in ([0, 10], [5, 5])
    table = critical_n.analyse(pack, settings)
    reps = table.filter(pl.col("step") == "replicate")
    assert reps.height == 4 * len(critical_n.KINDS) and set(reps["N_crit"]) == {3}
    # unequal layers (a subset of the units) are refused with the setting to change
    with pytest.raises(ValueError, match="analysis.critical_n.samples"):
        critical_n.unit_draws(np.array([0, 0, 1]), settings)


def test_vanishing_hand_case():
    """alpha = (0.25, 0.75), Delta/T = 1 * 2 * 0.5: L alpha in [0.5, 1.5] within exp(-+2); the
    upper bound e^2 >= L = 2 cannot be exceeded (vacuous)."""
    pack = make_pack([0.25, 0.75], [[1.0], [2.0]], key_norm_max=[2.0])
    pack.score_scale = np.array([0.5])
    row = vanishing.last_row(pack).row(0, named=True)
    assert row["max_scaled"] == pytest.approx(1.5) and row["min_scaled"] == pytest.approx(0.5)
    assert row["delta_over_t"] == 1.0
    assert (row["lower_bound_check"], row["upper_bound_check"]) == (HOLDS, VACUOUS)


def test_heads_report_and_coverage():
    """Two heads, two chunks, uniform weights over L = 4 keys: entropy log 4, max weight 1/4;
    N = 1 selects key 0 in both heads: one token in the union, distinguishable (N_s/N = 1)."""
    pack = make_pack(
        np.full((4, 4), 0.25),
        np.eye(4),
        chunk=[0, 0, 1, 1],
        head=[0, 1, 0, 1],
    )
    settings = head_settings(n_grid=[1, 2], ks_alpha=0.01)
    coverage, stats = heads.coverage(pack, settings)
    at_one = coverage.filter(pl.col("N") == 1)
    assert at_one["union_selected"].to_list() == [1, 1]
    assert at_one["heads"].to_list() == [2, 2]
    report = heads.per_head(pack, settings, stats)
    assert report.height == 2
    assert report["entropy"].to_list() == pytest.approx([math.log(4)] * 2)
    assert report["max_weight"].to_list() == pytest.approx([0.25] * 2)
    assert report["ns_ratio"].to_list() == [1.0, 1.0]
    assert report["chunks"].to_list() == [2, 2]
    # two chunks per head cannot reach p < 0.01: no per-head critical N, and not censored
    assert report["N_crit"].to_list() == [None, None]
    assert report["N_crit_censored"].to_list() == [False, False]


@pytest.mark.unit
def test_a_per_head_search_with_no_pass_is_censored_not_missing(monkeypatch):
    """Review 30: a head still separable at N = L - 1 (the most separable kind) and a head
    with too few chunks both had N_crit null; the column tells them apart."""
    from attnlimits.critical_search import CriticalSearch

    pack = make_pack(np.full((12, 4), 0.25), np.eye(4), chunk=np.arange(12) // 2, head=[0, 1] * 6)
    settings = head_settings(n_grid=[1], ks_alpha=0.05)
    _, stats = heads.coverage(pack, settings)
    monkeypatch.setattr(
        heads,
        "critical_n_against_expectation",
        lambda *a, **k: CriticalSearch(-1, [(1, 0.001), (3, 0.002)]),
    )
    report = heads.per_head(pack, settings, stats)
    assert report["chunks"].to_list() == [6, 6]
    assert report["N_crit"].to_list() == [None, None]
    assert report["N_crit_censored"].to_list() == [True, True]
    assert report["N_crit_low"].to_list() == [None, None]


def head_settings(n_grid: list[int], ks_alpha: float) -> heads.Settings:
    return heads.Settings(
        n=1,
        n_grid=n_grid,
        radius=1.0,
        ks_alpha=ks_alpha,
        mc_draws=2,
        seed=0,
        zero_weight="not_selected",
        critical_n_fractions=FRACTIONS,
        critical_n_band_edges=EDGES,
    )


def normalizer_settings(entry: dict) -> normalizer.Settings:
    return normalizer.Settings(
        entry=entry,
        max_samples=10,
        n_fixed=1,
        zero_weight="not_selected",
        ks_alpha=0.01,
        mc_draws=2,
        separability_length=4,
        n_grid=[1],
        radius=1.0,
        seed=0,
        critical_n_fractions=FRACTIONS,
        critical_n_band_edges=EDGES,
    )


@pytest.mark.parametrize(
    "entry, jacobian", [({"kind": "softmax", "temperature": 1.0}, 0.25), ({"kind": "sparsemax"}, 1)]
)
def test_normalizer_on_equal_logits(entry, jacobian):
    """Equal logits over L = 4: every rule gives 1/4 each; softmax's ||J|| = 1/L, sparsemax's
    is the projection onto sum-zero vectors, norm 1."""
    pack = make_pack(np.full((3, 4), 0.25), np.eye(4), logits=np.zeros((3, 4)))
    tables = normalizer.analyse([pack], "rule", normalizer_settings(entry), learned={})
    samples = tables.samples
    assert samples.height == 3 and set(samples["kind"]) == {entry["kind"]}
    assert samples["max_weight"].to_list() == pytest.approx([0.25] * 3)
    assert samples["support"].to_list() == [4, 4, 4]
    assert samples["entropy"].to_list() == pytest.approx([math.log(4)] * 3)
    assert samples["jacobian_norm"].to_list() == pytest.approx([jacobian] * 3)
    assert tables.critical_n["L"].to_list() == [4]
    assert tables.separability["ratio"].to_list() == [1.0, 1.0, 1.0]


@pytest.mark.unit
def test_the_normalizer_jobs_critical_n_is_not_testable_where_ks_cannot_reject():
    """Review 29: with 3 samples a side the KS test's smallest p is 0.1 > alpha, so every N
    "passes" and the search's N_crit = 1 says nothing; the row records the test's power and no
    N_crit (not a censored one)."""
    pack = make_pack(np.full((3, 4), 0.25), np.eye(4), logits=np.zeros((3, 4)))
    entry = {"kind": "softmax", "temperature": 1.0}
    crit = normalizer.analyse([pack], "rule", normalizer_settings(entry), learned={}).critical_n
    row = crit.row(0, named=True)
    assert row["ks_samples"] == 3 and row["ks_min_pvalue"] == pytest.approx(0.1)
    assert row["ks_testable"] is False and row["N_crit"] is None and row["evaluations"] == 0


class _CurveDistances:
    """Stands in for BlockedDistances: d~ and E equal (the KS test passes) exactly at the N of
    ``passes``, E shifted far away (it rejects) elsewhere; records the N asked."""

    def __init__(self, passes):
        self.passes, self.asked = passes, []

    def __call__(self, prepared, n_samples):
        self.values = np.arange(float(n_samples))
        return self

    def distance(self, n):
        self.asked.append(n)
        return self.values

    def monte_carlo(self, n, draws, rng):
        return self.values if self.passes(n) else self.values + 1e3


@pytest.mark.unit
@pytest.mark.parametrize(
    "passes, first",
    [
        # passes at 2-3 and from 90 on: bisection over [1, L - 1] found 90 (review 36)
        (lambda n: 2 <= n <= 3 or n >= 90, 3),
        # a window of passes and a rejection at L - 1: bisection stopped at "censored"
        (lambda n: 2 <= n <= 40, 3),
        # never passes: censored, every N of the list tried, up to L - 1
        (lambda n: False, None),
    ],
)
def test_the_normalizer_and_head_critical_n_walks_the_list(monkeypatch, passes, first):
    """The critical N of the normalizer jobs (Table 2, the study) and of the per-head report is
    Algorithm 3's first pass of Table 1's N list, walked in order, not a bisection that assumes
    the outcome monotone in N: the paper's list, its first pass, known to its cell."""
    from attnlimits import critical_search

    fractions = yaml.safe_load(Path("config/config.yaml").read_text())["analysis"]["all_rows"][
        "critical_n_fractions"
    ]
    grid = critical_search.critical_n_list(128, fractions, [0.03, 0.06, 0.12])
    curve = _CurveDistances(passes)
    monkeypatch.setattr(critical_search, "BlockedDistances", curve)
    got = critical_search.critical_n_against_expectation(
        [], 40, grid, 0.01, 2, lambda n: np.random.default_rng(n)
    )
    want = next((n for n in grid if passes(n)), None)
    assert want == first
    assert (None if got.censored else got.critical_n) == first
    # the walk stops at its first pass and asks nothing beyond it
    assert curve.asked == grid[: grid.index(first) + 1] if first else curve.asked == grid
    assert got.top_n == (first or 127)
    if first:
        # the cell (1, 3]: N = 1 failed before the pass at 3 (round(0.02 x 128) = 3)
        assert critical_search.cell_floor(got.critical_n, [n for n, _ in got.tried]) == 2


@pytest.mark.unit
def test_the_normalizer_job_reads_its_n_list_and_reports_the_cell(monkeypatch):
    """The job walks analysis.all_rows' list at its L and writes the first pass with its cell
    (N_crit_low) and the largest N tried."""
    from attnlimits_workflow.analyses import normalizer as job

    curve = _CurveDistances(lambda n: n >= 12)
    monkeypatch.setattr("attnlimits.critical_search.BlockedDistances", curve)
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(16), size=40)
    pack = make_pack(weights, rng.normal(size=(16, 3)), logits=np.log(weights))
    settings = dataclasses.replace(
        normalizer_settings({"kind": "softmax", "temperature": 1.0}),
        max_samples=40,
        separability_length=16,
        critical_n_fractions=[0.25, 0.5, 0.7, 0.9],
        critical_n_band_edges=[0.06],
    )
    row = job.analyse([pack], "rule", settings, learned={}).critical_n.row(0, named=True)
    # the list at L = 16: 0 and 1 (0.06 x 16 = 0.96, 0 dropped), 4, 8, 11, 14, 15
    assert curve.asked == [1, 4, 8, 11, 14]
    assert (row["N_crit"], row["N_crit_low"], row["top_N"], row["evaluations"]) == (14, 12, 14, 5)


@pytest.mark.unit
def test_the_normalizer_jobs_critical_n_is_searched_where_ks_can_reject():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(16), size=40)
    pack = make_pack(weights, rng.normal(size=(16, 3)), logits=np.log(weights))
    entry = {"kind": "softmax", "temperature": 1.0}
    settings = dataclasses.replace(
        normalizer_settings(entry), max_samples=40, separability_length=16
    )
    crit = normalizer.analyse([pack], "rule", settings, learned={}).critical_n
    row = crit.row(0, named=True)
    assert row["ks_samples"] == 40 and row["ks_testable"] is True
    assert row["ks_min_pvalue"] < 0.01 and row["evaluations"] > 0


def test_study_gradient_softmax_bound():
    """A two-way tie under softmax: ||d softmax(z/T)/dz|| = 1/(2T), exactly the rule's bound
    1/(2 T0 T) with T0 = 1: holds at every T, never violated."""
    pack = make_pack([[0.5, 0.5]] * 2, [[1.0], [2.0]], logits=np.zeros((2, 2)))
    rule = {"kind": "softmax", "temperature": 1.0}
    settings = study_gradient.Settings(
        rule=rule, entry=rule, temperatures=[2.0, 0.5], max_samples=5, seed=0
    )
    table = study_gradient.analyse(pack, settings, learned={})
    assert table["T"].to_list() == [0.5, 0.5, 2.0, 2.0]
    assert table["jacobian_norm"].to_list() == pytest.approx([1.0, 1.0, 0.25, 0.25])
    assert table["bound"].to_list() == pytest.approx([1.0, 1.0, 0.25, 0.25])
    assert not table["violated"].any() and not table["not_testable"].any()


def test_settings_are_read_by_name_and_extras_ignored():
    class Params:
        radius, delta_over, protocol, zero_weight = 1.0, "context", "all_rows", "literal"
        all_rows = ALL_ROWS
        seed = 7
        embedding = "value"  # read by the rule, not the analysis

    got = settings_from(separability.Settings, Params())
    assert got == separability.Settings(1.0, "context", "all_rows", ALL_ROWS, "literal", 7)


def test_analyses_log_to_the_given_logger(caplog):
    pack = make_pack([0.5, 0.3, 0.2], X_LINE)
    log = logging.getLogger("test-analyses")
    with caplog.at_level(logging.INFO, logger="test-analyses"):
        distance.analyse(pack, 1, distance_settings("last_row"), log)
    assert "fixed-set bound violated on 0 of 1 samples" in caplog.text


def test_pairwise_separation_is_the_closest_pair_on_the_sphere():
    """e1, e2, -e1 (scaled: the projection puts them on the unit sphere): delta = sqrt 2."""
    pack = make_pack([[1 / 3] * 3], np.array(X_CIRCLE) * [[3.0], [0.5], [2.0]])
    table = separability.pairwise_separation(pack, 1.0)
    assert table.columns == ["layer", "chunk", "head", "L", "delta"]
    assert table["delta"].to_list() == pytest.approx([math.sqrt(2)])
