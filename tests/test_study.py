"""The normalizer study: each trainable attention rule against its reference, training that learns
and repeats itself, trained models' dumps equal to their own attention, the study's config and
verdicts, and one small `snakemake study` end to end."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from dump_samples import load_samples
from hypothesis import given, settings
from hypothesis import strategies as st
from project import REPO, planned_rules, snakemake, synthetic_text, tiny_config, write_config
from test_normalizers import published

from attnlimits import attention_rules, intervals, rules
from attnlimits import normalizers as nz
from attnlimits.extraction import register_rule_attention
from attnlimits_workflow import study, study_seeds, training
from attnlimits_workflow.assemble import study_effective_set, study_prose
from attnlimits_workflow.dumps.write import write_batch
from attnlimits_workflow.loading import load_model

TOL = 1e-5
RULES = {
    "softmax": {"kind": "softmax"},
    "softmax_T0.1": {"kind": "softmax", "temperature": 0.1},
    "sparsemax": {"kind": "sparsemax"},
    "sparsemax_T2": {"kind": "sparsemax", "temperature": 2.0},
    "entmax15": {"kind": "entmax15"},
    "ssmax": {"kind": "scalable_softmax", "s_init": 0.43},
    "sa_softmax_raw": {"kind": "self_adjust_softmax_raw"},
    "sa_softmax": {"kind": "self_adjust_softmax"},
    "sigmoid": {"kind": "sigmoid_attention"},
    "softpick": {"kind": "softpick"},
    "sink": {"kind": "softmax_sink", "sink_init": 0.0},
    "entmax_alpha": {"kind": "entmax_alpha", "pre_alpha_init": 0.0},
    "log_length": {"kind": "log_length_softmax", "floor_scale": 4.0, "beta": 0.5},
    "stick_breaking": {"kind": "stick_breaking"},
    "gated": {"kind": "gated_softmax"},
}
# every other rule of the table at its defaults, named by its kind: a new rule is tested here too
RULES.update(
    {
        kind: {"kind": kind}
        for kind in rules.RULES
        if kind not in {r["kind"] for r in RULES.values()}
    }
)


def learned_of(s: torch.Tensor) -> dict[str, torch.Tensor]:
    """One per-head tensor for every learned parameter of the table (each rule takes its own)."""
    return {p.name: s for rule in rules.RULES.values() for p in rule.learned}


# ---------------------------------------------------------------- the published formula, per row
def reference_row(rule: dict, z: np.ndarray, learned: float) -> np.ndarray:
    """The rule on one row's visible scores, from its published formula (PUBLISHED in
    tests/test_normalizers.py, which fails for a rule without one), with the entry's settings and
    the head's ``learned`` value for each learned parameter (float64)."""
    entry = rules.get(rule["kind"])
    inits = {p.init_setting for p in entry.learned}
    settings = {k: v for k, v in rule.items() if k != "kind" and k not in inits}
    settings.update({p.name: learned for p in entry.learned})
    row = torch.tensor(z, dtype=torch.float64)
    return published(rule["kind"])(row, **settings).detach().numpy()


def causal_case(seed: int, heads: int = 3, n: int = 9, spread: float = 3.0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(heads, n, n, generator=g, dtype=torch.float64) * spread
    visible = attention_rules.visible_from_mask(None, True, n, n, "cpu")[0]
    s = torch.rand(heads, generator=g, dtype=torch.float64) + 0.2
    return scores, visible, s


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(RULES))
def test_each_rule_equals_its_reference_on_every_causal_row(name):
    rule = RULES[name]
    for seed in range(3):
        scores, visible, s = causal_case(seed)
        got = attention_rules.normalize(scores, visible, rule, learned_of(s)).numpy()
        for h in range(scores.shape[0]):
            for t in range(scores.shape[1]):
                want = reference_row(rule, scores[h, t, : t + 1].numpy(), float(s[h]))
                np.testing.assert_allclose(got[h, t, : t + 1], want, atol=1e-9, rtol=1e-7)
                assert np.all(got[h, t, t + 1 :] == 0.0)  # masked keys get no weight


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(RULES))
@settings(max_examples=5, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 12),
    spread=st.sampled_from([0.01, 1.0, 10.0, 60.0]),
)
def test_rules_match_references_property(name, seed, n, spread):
    rule = RULES[name]
    scores, visible, s = causal_case(seed, heads=2, n=n, spread=spread)
    got = attention_rules.normalize(scores, visible, rule, learned_of(s)).numpy()
    for h in range(2):
        for t in range(n):
            want = reference_row(rule, scores[h, t, : t + 1].numpy(), float(s[h]))
            np.testing.assert_allclose(got[h, t, : t + 1], want, atol=1e-8, rtol=1e-6)


@pytest.mark.unit
def test_sparse_rules_use_the_entmax_package():
    import entmax

    z = torch.randn(4, 7, dtype=torch.float64)
    every = torch.ones(4, 1, 7, dtype=torch.bool)
    for kind, fn in (("sparsemax", entmax.sparsemax), ("entmax15", entmax.entmax15)):
        got = attention_rules.normalize(z[:, None] / 0.5, every, {"kind": kind})
        assert torch.equal(got[:, 0], fn(z / 0.5, dim=-1))


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(RULES))
def test_gradients_are_finite_even_with_ties_and_masks(name):
    scores, visible, s = causal_case(4, spread=5.0)
    scores[0, -1, :] = 1.5  # a row of ties
    scores = scores.clone().requires_grad_(True)
    s = s.clone().requires_grad_(True)
    out = attention_rules.normalize(scores, visible, RULES[name], learned_of(s))
    (out * torch.randn_like(out)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    if rules.get(RULES[name]["kind"]).learned:
        assert torch.isfinite(s.grad).all()


@pytest.mark.unit
def test_scalable_softmax_counts_the_visible_keys_not_the_padded_length():
    scores, visible, s = causal_case(5)
    out = attention_rules.normalize(scores, visible, RULES["ssmax"], {"s": s})
    t = 3  # row 3 sees 4 keys: softmax(s log 4 z)
    want = torch.softmax(s[0] * math.log(4) * scores[0, t, :4], -1)
    torch.testing.assert_close(out[0, t, :4], want)


@pytest.mark.unit
def test_unknown_rule_and_setting_are_refused():
    with pytest.raises(ValueError, match="unknown attention rule"):
        attention_rules.parameters({"kind": "softermax"})
    with pytest.raises(ValueError, match="unknown settings"):
        attention_rules.parameters({"kind": "sparsemax", "s_init": 1.0})


@pytest.mark.unit
def test_raw_self_adjust_jacobian_norm_equals_the_dense_one():
    z = np.random.default_rng(3).normal(size=(5, 8)) * 3
    got = nz.self_adjust_softmax_raw_jacobian_norm(z, 8)
    for i, row in enumerate(z):
        p = np.exp(row - row.max())
        p /= p.sum()
        jac = np.diag(p + row * p) - np.outer(row * p, p)  # d(z_i p_i) / d z_j
        eps = 1e-6
        numeric = np.stack(
            [
                (
                    nz.self_adjust_softmax_raw_weights((row + eps * e)[None], 8)[0]
                    - nz.self_adjust_softmax_raw_weights((row - eps * e)[None], 8)[0]
                )
                / (2 * eps)
                for e in np.eye(8)
            ],
            axis=1,
        )
        np.testing.assert_allclose(jac, numeric, atol=1e-7)
        assert got[i] == pytest.approx(np.linalg.norm(jac, 2), rel=1e-8)


@pytest.mark.unit
def test_per_row_scalable_softmax_equals_row_by_row():
    z = np.random.default_rng(4).normal(size=(3, 6))
    s = np.array([[0.2], [0.5], [1.1]])
    w = nz.scalable_softmax_weights(z, 6, s)
    j = nz.scalable_softmax_jacobian_norm(z, 6, s)
    for i in range(3):
        np.testing.assert_allclose(w[i], nz.scalable_softmax_weights(z[i : i + 1], 6, s[i, 0])[0])
        assert j[i] == pytest.approx(
            nz.scalable_softmax_jacobian_norm(z[i : i + 1], 6, s[i, 0])[0], rel=1e-10
        )


# ------------------------------------------------------------------------------------ training
DEFAULT_TEMPERATURES = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["analysis"][
    "gradient"
]["temperatures"]
ARCH = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "layers": 2,
    "heads": 4,
    "kv_heads": 2,
    "max_positions": 64,
    "rope_theta": 10000.0,
}
TRAIN = {
    "context": 32,
    "batch_size": 8,
    "steps": 40,
    "learning_rate": 0.01,
    "warmup_steps": 5,
    "weight_decay": 0.1,
    "grad_clip": 1.0,
    "log_every": 10,
}


@pytest.fixture(scope="module")
def corpus_ids(tmp_path_factory):
    text = synthetic_text(4000, seed=1)
    tok = training.train_tokenizer(text, 300, 2)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return np.asarray(tok.encode(text).ids, dtype=np.int64), tok.get_vocab_size(), path


def trained(rule, corpus_ids, steps=TRAIN["steps"]):
    ids, vocab, _ = corpus_ids
    torch.set_num_threads(1)
    model = training.build_model(ARCH, rule, vocab, 0, TRAIN["context"])
    history = training.train(model, ids, {**TRAIN, "steps": steps}, 0, log=lambda _: None)
    return model, history


@pytest.mark.integration
@pytest.mark.parametrize(
    "name",
    ["softmax", "sparsemax", "ssmax", "sa_softmax_raw"]
    + ["sigmoid", "softpick", "sink", "entmax_alpha", "log_length", "stick_breaking", "gated"],
)
def test_a_tiny_training_run_lowers_the_loss(name, corpus_ids):
    _, history = trained(RULES[name], corpus_ids)
    assert history[-1]["loss"] < history[0]["loss"] - 0.5, history


@pytest.mark.integration
def test_training_is_deterministic_for_a_seed(corpus_ids):
    a, ha = trained(RULES["ssmax"], corpus_ids, steps=10)
    b, hb = trained(RULES["ssmax"], corpus_ids, steps=10)
    assert [h["loss"] for h in ha] == [h["loss"] for h in hb]
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb), ka


@pytest.mark.integration
def test_evaluation_by_hand(corpus_ids):
    """The whole-window and tail losses equal a per-position loop over the model's logits."""
    model, _ = trained(RULES["softmax"], corpus_ids, steps=5)
    ids = corpus_ids[0][:200]
    got = training.evaluate(model, ids, 32, 3, 0.25)
    losses = []
    with torch.inference_mode():
        for w in range(3):
            window = torch.from_numpy(ids[w * 32 : w * 32 + 33])
            logp = torch.log_softmax(model(input_ids=window[None, :-1]).logits[0].double(), -1)
            losses.append([-logp[t, window[t + 1]].item() for t in range(32)])
    losses = np.array(losses)
    assert got["windows"] == 3 and got["tail_positions"] == 8
    assert got["loss"] == pytest.approx(losses.mean(), rel=1e-9)
    assert got["tail_loss"] == pytest.approx(losses[:, -8:].mean(), rel=1e-9)
    assert got["perplexity"] == pytest.approx(math.exp(losses.mean()), rel=1e-9)


@pytest.mark.unit
def test_held_out_split_keeps_the_corpus_start():
    held, rest = training.split_tokens(np.arange(100), 0.1)
    assert held.tolist() == list(range(10)) and rest[0] == 10


@pytest.mark.integration
@pytest.mark.parametrize(
    "name",
    ["softmax_T0.1", "sparsemax", "entmax15", "ssmax", "sa_softmax"]
    + ["sigmoid", "softpick", "sink", "entmax_alpha", "log_length", "stick_breaking", "gated"],
)
def test_trained_models_dump_equals_their_own_attention(name, corpus_ids, tmp_path):
    """The eager-equality check for a trained model: the dumped rows equal the attention the
    model computes in its forward (output_attentions), and the numpy rule on the dumped logits."""
    model, _ = trained(RULES[name], corpus_ids, steps=15)
    ids, _, tokenizer_path = corpus_ids
    folder = tmp_path / "model"
    training.save_trained(model, tokenizer_path, folder, {"name": name})
    captured = load_model(folder)
    own = training.load_trained(folder, register_rule_attention())
    chunks = {0: ids[:48], 1: ids[100:148]}
    out = tmp_path / "batch000"
    out.mkdir()
    lengths = [2, 9, 32, 48]
    write_batch(
        out,
        captured,
        chunks,
        lengths,
        query_row="last",
        store_hidden=False,
        provenance={"weights_sha256": "w", "tokens_fingerprint": "t"},
        extra_metadata={"model": name, "model_type": "llama", "corpus_sha256": "c"},
        compression="zstd",
    )
    learned = training.learned_parameters(captured)
    with torch.inference_mode():
        attentions = {
            c: own(torch.from_numpy(t)[None], output_attentions=True).attentions
            for c, t in chunks.items()
        }
    kind = RULES[name]["kind"]
    entry = rules.get(kind)
    for L in lengths:
        s = load_samples([out], L, embedding="value", with_logits=True)
        assert len(s.head) == 2 * ARCH["layers"] * ARCH["heads"]
        for i in range(len(s.head)):
            layer, head = int(s.layer[i]), int(s.head[i])
            ref = attentions[int(s.chunk[i])][layer][0, head, L - 1, :L].numpy()
            assert np.abs(s.weights[i] - ref).max() <= TOL, (name, L, i)
            inits = {p.init_setting for p in entry.learned}
            params = {k: v for k, v in RULES[name].items() if k != "kind" and k not in inits}
            params.update({q: learned[q][layer][head] for q in learned})
            numpy_rule = entry.weights(np.asarray(s.logits[i], dtype=np.float64)[None], L, **params)
            assert np.abs(s.weights[i] - numpy_rule[0]).max() <= TOL, (name, L, i)


# -------------------------------------------------------------------------------- verdicts
@pytest.mark.unit
def test_verdicts():
    assert study.verdict(3.0, 1.0, 1.5) == "relaxes"
    assert study.verdict(0.5, 1.0, 1.5) == "tightens"
    assert study.verdict(1.2, 1.0, 1.5) == "no change"
    assert study.verdict(1.5, 1.0, 1.5) == "relaxes"  # at the ratio: a verdict
    assert study.verdict(None, 1.0, 1.5) == "not measured"
    # 0 is a value (a rule with no low-T sensitivity at all), never ratio x above 0
    assert study.verdict(1.0, 0.0, 1.5) == "relaxes"
    assert study.verdict(0.0, 0.0, 1.5) == "no change"
    assert study.verdict(0.0, 1.0, 1.5, "smaller") == "relaxes"
    assert study.verdict(0.0, (0.0, 0.1), 1.5) == study.UNDECIDED
    assert study.verdict(-0.1, 1.0, 1.5) == "not measured"
    assert intervals.loglog_slope(np.array([1, 2, 4]), np.array([1, 0.5, 0.25])) == pytest.approx(
        -1
    )


@pytest.mark.unit
def test_verdicts_follow_each_measures_orientation():
    # smaller relaxes: the same numbers, the verdicts swapped
    assert study.verdict(3.0, 1.0, 1.5, "smaller") == "tightens"
    assert study.verdict(0.5, 1.0, 1.5, "smaller") == "relaxes"
    assert study.verdict(1.2, 1.0, 1.5, "smaller") == "no change"
    # both readings defensible: no verdict whatever the numbers
    for value in (100.0, 1.0, 0.01, None):
        assert study.verdict(value, 1.0, 1.5, "either") == study.NO_VERDICT


@pytest.mark.unit
def test_verdicts_on_censored_intervals_by_hand():
    # value known to lie in [0.4, 1]; baseline exact 0.2: surely >= 1.5 x 0.2
    assert study.verdict((0.4, 1.0), 0.2, 1.5) == "relaxes"
    # [0.25, 1] against 0.2: at least "no change", possibly "relaxes" -- undecided
    assert study.verdict((0.25, 1.0), 0.2, 1.5) == study.UNDECIDED
    # baseline censored in [0.5, 1]: 0.3 <= 0.5 / 1.5 tightens whatever the baseline is ...
    assert study.verdict(0.3, (0.5, 1.0), 1.5) == "tightens"
    # ... 0.4 is no tightening, and "no change" only if the baseline is below 0.6: open
    assert study.verdict(0.4, (0.5, 1.0), 1.5) == study.UNDECIDED
    # both censored in overlapping intervals: nothing is settled
    assert study.verdict((0.9, 1.0), (0.95, 1.0), 1.5) == "no change"
    assert study.verdict((0.5, 1.0), (0.9, 1.0), 1.5) == study.UNDECIDED


@pytest.mark.unit
def test_shares_are_compared_on_their_odds():
    # on the shares a baseline of 0.7 could only be relaxed by 1.05: 0.99 read "no change"
    assert study.verdict(0.99, 0.7, 1.5) == "no change"
    # odds 99 against 7/3: relaxes; 3 against 7/3: within the ratio; 0.5 (odds 1): tightens
    assert study.verdict(0.99, 0.7, 1.5, share=True) == "relaxes"
    assert study.verdict(0.75, 0.7, 1.5, share=True) == "no change"
    assert study.verdict(0.5, 0.7, 1.5, share=True) == "tightens"
    # a share of 1 has infinite odds; a censored share up to 1 leaves the comparison open
    assert study.verdict(1.0, 0.7, 1.5, share=True) == "relaxes"
    assert study.verdict((0.7, 1.0), 0.7, 1.5, share=True) == study.UNDECIDED
    assert intervals.odds(0.75) == pytest.approx(3.0) and intervals.odds(1.2) == math.inf
    assert intervals.odds(-0.1) == 0.0
    assert study.LIMITS["distance"].share and study.LIMITS["separability"].share
    assert not study.LIMITS["vanishing"].share


def sweep_table(norms_by_t: dict[float, list[float]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "T": [t for t, ns in norms_by_t.items() for _ in ns],
            "jacobian_norm": [n for ns in norms_by_t.values() for n in ns],
        }
    )


def hand_measures(max_weight, jacobian, n_crit, sweep, lengths=(8, 16)):
    samples = pl.DataFrame(
        {
            "L": [L for L in lengths for _ in range(2)],
            "max_weight": [w for w in max_weight for _ in range(2)],
            "jacobian_norm": [j for j in jacobian for _ in range(2)],
        }
    )
    critical = pl.DataFrame(
        {"L": list(lengths), "N_crit": n_crit}, schema_overrides={"N_crit": pl.Int64}
    )
    separability = pl.DataFrame({"N": [4, 4], "ratio": [0.5, 0.5]})
    evaluation = {
        "contexts": [
            {"context": 32, "perplexity": 10.0, "tail_perplexity": 10.0},
            {"context": 64, "perplexity": 20.0, "tail_perplexity": 20.0},
        ]
    }
    if sweep is None:  # the study's call without its temperature sweep
        return study.limit_measures(samples, critical, separability, evaluation)
    return study.limit_measures(samples, critical, separability, evaluation, sweep)


@pytest.mark.unit
def test_a_larger_jacobian_at_low_temperature_is_not_relaxing_the_gradient_limit():
    """Issue 31 item 8: the paper (Corollary 3, Section 5) calls a large ||J|| at low T the
    problem. A rule whose ||J|| is 10x softmax's at low T, like a model trained at T = 0.1, tightens
    the low-T limit, and its larger ||J|| at the trained T gets no verdict either way."""
    softmax = hand_measures(
        [0.2, 0.1],
        [0.05, 0.02],
        [2, 4],
        sweep_table({0.01: [10.0, 50.0], 0.1: [2.0, 5.0], 1.0: [0.1, 0.2]}),
    )
    sharp = hand_measures(
        [0.4, 0.35],  # decays by 0.875 from L = 8 to 16, softmax's by 0.5 (1/L)
        [2.0, 1.5],  # median ||J|| at the largest L: 1.5 vs softmax's 0.02
        [2, 4],
        sweep_table({0.01: [100.0, 500.0], 0.1: [20.0, 50.0], 1.0: [1.0, 2.0]}),
    )
    # the mean T ||J|| at T <= 0.1: of (0.1, 0.5, 0.2, 0.5) 0.325; of (1, 5, 2, 5) 3.25
    assert softmax["gradient_low_t"] == pytest.approx(0.325)
    assert sharp["gradient_low_t"] == pytest.approx(3.25)
    found = study.verdicts({"softmax": softmax, "sharp": sharp}, "softmax", 1.5)
    assert found["sharp"]["gradient_low_t"] == "tightens"
    assert found["sharp"]["gradient"] == study.NO_VERDICT
    assert "relaxes" not in (found["sharp"]["gradient"], found["sharp"]["gradient_low_t"])
    assert found["sharp"]["vanishing"] == "relaxes"  # a slower decay still relaxes Lemma 1
    assert found["softmax"]["gradient_low_t"] == "baseline"
    # and a rule whose Jacobian stays small at low T relaxes it
    calm = hand_measures(
        [0.2, 0.1], [0.05, 0.02], [2, 4], sweep_table({0.01: [1.0, 2.0], 1.0: [0.1, 0.1]})
    )
    assert calm["gradient_low_t"] == pytest.approx(0.015)
    both = study.verdicts({"softmax": softmax, "calm": calm}, "softmax", 1.5)
    assert both["calm"]["gradient_low_t"] == "relaxes"
    # no sweep, or none at T <= 0.1: not measured
    none = hand_measures([0.2, 0.1], [0.05, 0.02], [2, 4], sweep_table({1.0: [0.1]}))
    assert none["gradient_low_t"] is None
    assert study.verdicts({"softmax": softmax, "x": none}, "softmax", 1.5)["x"][
        "gradient_low_t"
    ] == ("not measured")


@pytest.mark.unit
def test_a_rule_censored_at_every_length_counts_as_at_least_the_search_bound():
    """Issue 31 item 9: a censored N_crit (still distinguishable at N = L - 1, the normalizer
    job's bound) is never dropped, and is flagged; review 31: it counts as at least L, not
    L - 1."""
    softmax = hand_measures([0.2, 0.1], [0.05, 0.02], [2, 4], None)
    censored = hand_measures([0.2, 0.1], [0.05, 0.02], [None, None], None)
    # by hand: (8/8 + 16/16) / 2 = 1 at both ends
    assert censored["distance"] == pytest.approx(1.0)
    assert censored["distance_upper"] == pytest.approx(1.0)
    assert censored["distance_censored"] == 2 and censored["distance_lengths"] == 2
    assert softmax["distance"] == pytest.approx(0.25) and softmax["distance_censored"] == 0
    assert softmax["distance_upper"] == pytest.approx(0.25)
    assert study_prose.shown(censored, "distance") == ">= 1; 2 of 2 L censored"
    assert study_prose.shown(softmax, "distance") == "0.25; 0 of 2 L censored"
    found = study.verdicts({"softmax": softmax, "censored": censored}, "softmax", 1.5)
    assert found["censored"]["distance"] == "relaxes"  # 1 >= 1.5 x 0.25, whatever the rest
    # a censored baseline: the comparison is open
    flipped = study.verdicts({"censored": censored, "softmax": softmax}, "censored", 1.5)
    assert flipped["softmax"]["distance"] == "tightens"  # 0.25 <= 1 / 1.5


@pytest.mark.unit
def test_critical_n_bound_is_the_largest_n_tried_where_the_table_has_it():
    # the analysis tables' layout: one row per N tried; censored at L = 100 after N = 90
    critical = pl.DataFrame(
        {
            "L": [100, 100, 100, 50, 50],
            "N": [1, 45, 90, 1, 6],
            "N_crit": [None, None, None, 6, 6],
        },
        schema_overrides={"N_crit": pl.Int64},
    )
    got = study.censored_critical_n(critical)
    assert got["L"].to_list() == [50, 100]
    assert got["N_max"].to_list() == [6, 90]
    assert got["censored"].to_list() == [False, True]
    # review 31: censored after N = 90, N_crit is at least 91; review 36: a first pass at 6
    # after N = 1 failed is known to its cell (1, 6], a share in [2/50, 6/50]
    assert got["share_low"].to_list() == pytest.approx([2 / 50, 91 / 100])
    assert got["share_high"].to_list() == pytest.approx([6 / 50, 1.0])
    # the normalizer job's layout: one row per L, searched up to L - 1
    plain = study.censored_critical_n(
        pl.DataFrame({"L": [32], "N_crit": [None]}, schema_overrides={"N_crit": pl.Int64})
    )
    # no N < L passed: N_crit >= L, a share of 1 at both ends (1 the cap)
    assert plain["N_max"].to_list() == [31] and plain["share_low"][0] == 1.0
    with pytest.raises(ValueError, match="several N_crit"):
        study.censored_critical_n(pl.DataFrame({"L": [8, 8], "N": [1, 7], "N_crit": [1, 3]}))


@pytest.mark.unit
def test_the_normalizer_jobs_critical_n_is_read_as_its_cell():
    """Review 36: the normalizer job walks Algorithm 3's list and writes the first pass's cell
    (N_crit_low, N_crit] and the largest N tried; the share is that cell over L, and a censored
    length's bound its top N + 1. A table without the columns (written by a bisection to
    adjacent integers) reads N_crit as exact."""
    critical = pl.DataFrame(
        {"L": [64, 128], "N_crit": [8, None], "N_crit_low": [5, None], "top_N": [8, 127]},
        schema_overrides={"N_crit": pl.Int64, "N_crit_low": pl.Int64, "top_N": pl.Int64},
    )
    got = study.censored_critical_n(critical)
    assert got["N_max"].to_list() == [8, 127]
    assert got["share_low"].to_list() == pytest.approx([5 / 64, 1.0])
    assert got["share_high"].to_list() == pytest.approx([8 / 64, 1.0])
    old = study.censored_critical_n(critical.drop("N_crit_low", "top_N"))
    assert old["share_low"].to_list() == pytest.approx([8 / 64, 1.0])


@pytest.mark.unit
def test_critical_n_leaves_out_lengths_where_the_ks_test_cannot_reject():
    """Review 29: the normalizer job marks a length whose sample count cannot reach alpha; its
    N_crit is no measurement, neither found nor censored, and the share's mean leaves it out."""
    critical = pl.DataFrame(
        {"L": [16, 32], "N_crit": [None, 4], "ks_testable": [False, True]},
        schema_overrides={"N_crit": pl.Int64},
    )
    got = study.censored_critical_n(critical)
    assert got["L"].to_list() == [32] and got["censored"].to_list() == [False]
    assert got["share_low"].to_list() == pytest.approx([4 / 32])
    # review 31: the page counts them, as it promises no silently dropped length
    assert study.untestable_lengths(critical) == 1
    assert study.untestable_lengths(critical.drop("ks_testable")) == 0


@pytest.mark.unit
def test_limit_measures_by_hand():
    samples = pl.DataFrame(
        {
            "L": [8, 8, 16, 16],
            "max_weight": [0.5, 0.3, 0.2, 0.4],
            "jacobian_norm": [0.1, 0.3, 0.2, 0.6],
        }
    )
    critical = pl.DataFrame({"L": [8, 16], "N_crit": [2, None]})
    separability = pl.DataFrame({"N": [1, 4, 4], "ratio": [1.0, 0.5, 0.75]})
    evaluation = {
        "contexts": [
            {"context": 64, "perplexity": 20.0, "tail_perplexity": 16.0},
            {"context": 32, "perplexity": 10.0, "tail_perplexity": 12.0},
        ]
    }
    m = study.limit_measures(samples, critical, separability, evaluation)
    # the rate: medians 0.4 at L = 8 and 0.3 at L = 16, slope log2 0.75, a factor 0.75 over 8..16
    assert m["vanishing"] == pytest.approx(0.75)
    assert m["vanishing_level"] == pytest.approx(0.3)  # median of 0.2, 0.4 at L = 16
    assert m["vanishing_fit_lengths"] == (8, 16)
    assert m["gradient"] == pytest.approx(0.4)
    # L = 16 censored after N = 15: N_crit = 16 (review 31), so (2/8 + 16/16) / 2, both ends
    assert m["distance"] == pytest.approx((2 / 8 + 16 / 16) / 2)
    assert m["distance_upper"] == pytest.approx((2 / 8 + 1) / 2)
    assert m["distance_lengths"] == 2 and m["distance_censored"] == 1
    assert m["separability"] == pytest.approx(0.625)
    assert m["length"] == pytest.approx(0.75)  # tail ppl(32) / tail ppl(64)
    assert m["vanishing_slope"] == pytest.approx(math.log2(0.3 / 0.4))
    assert m["gradient_low_t"] is None  # no temperature sweep given


PAPER = REPO.parent / "shared" / "paper" / "001_38268391be101c5c.txt"


@pytest.mark.unit
def test_every_limit_is_oriented_with_a_verbatim_sentence_of_the_paper():
    assert set(study.LIMITS) == {
        "vanishing",
        "distance",
        "separability",
        "gradient",
        "gradient_low_t",
        "length",
    }
    for key, limit in study.LIMITS.items():
        assert limit.relaxes in ("larger", "smaller", "either"), key
        assert limit.quotes, key
        assert (limit.relaxes == "either") == bool(limit.reason), key
    assert study.LIMITS["gradient_low_t"].relaxes == "smaller"
    assert study.LIMITS["gradient"].relaxes == "either"
    if not PAPER.exists():
        pytest.skip(f"the paper's text is not at {PAPER}")
    text = " ".join(PAPER.read_text().split())
    for key, limit in study.LIMITS.items():
        for quote in limit.quotes:
            assert " ".join(quote.text.split()) in text, (key, quote.text)


@pytest.mark.unit
def test_the_page_states_orientations_censoring_and_no_verdicts():
    """The template's pieces on hand-made measures: the orientation table, each limit's answer
    line, and the template filled without a leftover or unknown field."""
    softmax = hand_measures(
        [0.2, 0.1], [0.05, 0.02], [2, 4], sweep_table({0.01: [10.0, 50.0], 1.0: [0.1]})
    )
    sharp = hand_measures(
        [0.4, 0.3], [2.0, 1.5], [None, None], sweep_table({0.01: [100.0, 500.0], 1.0: [1.0]})
    )
    measures = {"softmax": softmax, "sharp": sharp}
    found = study.verdicts(measures, "softmax", 1.5)
    table = study_prose.orientation_table()
    for limit in study.LIMITS.values():
        assert limit.title in table and limit.quotes[0].section in table
    assert "both readings defensible: no verdict" in table
    gradient = study_prose.answer_line("gradient", "G", measures, found, "softmax")
    assert gradient.startswith("**G** -- softmax: 0.02.")
    assert "No verdict, both readings defensible" in gradient and "sharp (1.5)" in gradient
    assert "Relaxes" not in gradient
    low_t = study_prose.answer_line("gradient_low_t", "C", measures, found, "softmax")
    assert (
        "Tightens: sharp (3)." in low_t
    )  # means 3 and 0.3 of (10, 50) x 0.01 and (100, 500) x 0.01
    distance = study_prose.answer_line("distance", "D", measures, found, "softmax")
    assert "softmax: 0.25; 0 of 2 L censored." in distance
    assert "Relaxes: sharp (>= 1; 2 of 2 L censored)." in distance
    template = (REPO / "workflow" / "resources" / "study_template.md").read_text()
    names = set(re.findall(r"\[\[([a-z_]+)\]\]", template))
    assert {"orientation_table", "censored_lengths", "low_temperature"} <= names
    page = study_prose.fill_template(template, {n: f"<{n}>" for n in names})
    assert "[[" not in page
    with pytest.raises(KeyError, match="unknown field"):
        study_prose.fill_template("[[nothing]]", {})


# ------------------------------------------------------------------------- Jacobian bounds
def autograd_jacobian_norm(rule: dict, z: np.ndarray, temperature: float, s: float) -> float:
    """||d rule(z / T) / d z||_2 of one row from the dense autograd Jacobian of the model's own
    rule (attention_rules.normalize), independent of attnlimits.normalizers."""
    spec = {k: v for k, v in rule.items() if k != "s_init"}
    n = z.size
    visible = torch.ones((1, 1, 1, n), dtype=torch.bool)
    scale = torch.tensor([s], dtype=torch.float64)  # one head

    def f(t):
        return attention_rules.normalize(
            (t / temperature).view(1, 1, 1, n), visible, spec, {"s": scale}
        ).view(n)

    jac = torch.autograd.functional.jacobian(f, torch.tensor(z, dtype=torch.float64)).numpy()
    return float(np.linalg.norm(jac, 2))


def bound(rule: dict, temperature: float, n: int = 4, **learned):
    """study.jacobian_bound of a study rule at rows of n keys, learned values as keywords."""
    arguments = {**{k: v for k, v in rule.items() if k not in ("kind", "s_init")}, **learned}
    return study.jacobian_bound(rule["kind"], temperature, n, arguments)


@pytest.mark.unit
def test_jacobian_bounds_by_hand_and_tight_at_a_tie():
    assert bound({"kind": "softmax", "temperature": 0.1}, 2.0) == pytest.approx(2.5)
    assert bound({"kind": "sparsemax"}, 4.0) == pytest.approx(0.25)
    assert bound({"kind": "entmax15", "temperature": 2.0}, 1.0) == 0.5
    # s log(n) with n = e: |s| / (2 T)
    np.testing.assert_allclose(
        bound({"kind": "scalable_softmax"}, 2.0, math.e, s=np.array([[-1.0], [3.0]])), [0.25, 0.75]
    )
    assert bound({"kind": "self_adjust_softmax"}, 1.0) is None
    with pytest.raises(ValueError, match="needs the learned s"):
        bound({"kind": "scalable_softmax"}, 1.0)
    # Two equal logits: softmax's J = [[1, -1], [-1, 1]] / (4 T), norm 1/(2T); sparsemax's
    # J = [[1, -1], [-1, 1]] / (2 T), norm 1/T: both bounds are attained.
    tie = np.zeros(2)
    for rule in ({"kind": "softmax", "temperature": 0.5}, {"kind": "sparsemax"}):
        norm = autograd_jacobian_norm(rule, tie, 3.0, 1.0)
        assert norm == pytest.approx(bound(rule, 3.0), rel=1e-12)


@pytest.mark.unit
@settings(max_examples=40, deadline=None)
@given(
    rule=st.sampled_from(
        [
            {"kind": "softmax"},
            {"kind": "softmax", "temperature": 0.1},
            {"kind": "sparsemax"},
            {"kind": "entmax15", "temperature": 0.5},
            {"kind": "scalable_softmax"},
        ]
    ),
    seed=st.integers(0, 10_000),
    n=st.integers(2, 10),
    spread=st.sampled_from([0.1, 1.0, 10.0]),
    temperature=st.sampled_from([0.01, 0.3, 1.0, 30.0]),
    s=st.sampled_from([-0.7, 0.2, 1.5]),
)
def test_jacobian_bounds_hold_against_autograd(rule, seed, n, spread, temperature, s):
    z = np.random.default_rng(seed).normal(0, spread, n)
    if rule["kind"] != "softmax" and len(np.unique(np.round(z, 6))) < n:
        return  # the sparse rules' supports change at ties: no Jacobian there
    norm = autograd_jacobian_norm(rule, z, temperature, s)
    learned = {q.name: s for q in rules.get(rule["kind"]).learned}  # one head's value
    largest = np.max(bound(rule, temperature, n, **learned))
    assert norm <= largest * (1 + 1e-9), (norm, largest)
    # and the normalizers' exact norm, as the workflow computes it, is the autograd one
    entry = rules.get(rule["kind"])
    params = {**{k: v for k, v in rule.items() if k != "kind"}, **learned}
    ours = entry.jacobian_norm(z[None] / temperature, n, **params)[0] / temperature
    assert ours == pytest.approx(norm, rel=1e-7, abs=1e-12)


@pytest.mark.unit
def test_normalizer_arguments_take_each_samples_learned_s():
    learned = {"s": [[0.1, 0.2], [0.3, 0.4]]}
    args = training.normalizer_arguments(
        {"kind": "scalable_softmax"}, learned, np.array([1, 0, 1]), np.array([0, 1, 1])
    )
    np.testing.assert_array_equal(args["s"], [[0.3], [0.2], [0.4]])
    assert training.normalizer_arguments({"kind": "softmax", "temperature": 2.0}, {}, [0], [0]) == {
        "temperature": 2.0
    }


# ---------------------------------------------------------------------------- config + workflow
def study_config(tmp, **normalizers):
    cfg = tiny_config(tmp)
    cfg["study"] = {
        "normalizers": normalizers,
        "seeds": [0],
        # the untrained models cost as much as trained ones to diagnose: off in the tests'
        # studies, on where a test says so (and in the end-to-end run with UNTRAINED)
        "untrained_seeds": [],
        "tokenizer": {"vocab_size": 300},
        "architecture": {**ARCH},
        "training": {**TRAIN, "steps": 6, "log_every": 3, "threads": 1},
        "evaluation": {"contexts": [32, 64], "max_windows": 4, "tail_fraction": 0.25},
        "effective_set": {"windows": 2, "targets": 16, "variants": ["attention-delete"]},
        "diagnostics": {
            "chunking": {"chunk_length": 64, "n_chunks": 2},
            "extraction": {"chunks_per_batch": 2},
            "analysis": {
                "lengths": [8, 16, 32, 64],
                "distance": {"n_fixed": 2, "length_fixed": 64, "n_grid": [1, 4]},
                "separability": {"length": 32, "n_grid": [1, 4]},
                "gradient": {"length": 32},
            },
            "beyond": {"max_samples": 64, "n": 4},
        },
    }
    return cfg


@pytest.mark.unit
def test_study_models_are_runs_with_their_own_rule(tmp_path):
    import yaml

    from attnlimits_workflow.config import load_config

    cfg = study_config(tmp_path, softmax={"kind": "softmax"}, ssmax={"kind": "scalable_softmax"})
    cfg["study"]["untrained_seeds"] = [0]
    defaults = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    _, runs, default = load_config(
        defaults, cfg, REPO / "workflow" / "schemas" / "config.schema.yaml", REPO
    )
    assert default == "tiny-gpt2"
    # each rule's trained model, and its untrained one (study.untrained_seeds: [0] by default)
    assert set(runs) == {
        "tiny-gpt2",
        "study-softmax-seed0",
        "study-ssmax-seed0",
        "study-softmax-init0",
        "study-ssmax-init0",
    }
    assert runs["study-ssmax-init0"]["model"]["untrained"] is True
    assert runs["study-ssmax-seed0"]["model"]["untrained"] is False
    assert runs["study-ssmax-init0"]["model"]["study_seed"] == 0
    assert runs["study-ssmax-seed0"]["model"]["trained"] == "ssmax"
    assert runs["study-ssmax-seed0"]["model"]["study_seed"] == 0
    assert runs["study-ssmax-seed0"]["beyond"]["normalizers"] == {
        "ssmax": {"kind": "scalable_softmax"}
    }
    assert runs["study-softmax-seed0"]["analysis"]["separability"]["length"] == 32
    assert runs["tiny-gpt2"]["analysis"]["separability"]["length"] == 64
    # The study starts from the defaults, not from the paper run's own analysis settings.
    grid = defaults["analysis"]["gradient"]["temperatures"]
    assert runs["study-softmax-seed0"]["analysis"]["gradient"]["temperatures"] == grid
    assert runs["tiny-gpt2"]["analysis"]["gradient"]["temperatures"] != grid


@pytest.mark.unit
def test_study_errors_need_the_training_context_first_and_a_ratio_above_one(tmp_path):
    import yaml

    from attnlimits_workflow.config import study_errors

    defaults = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg = {"study": {**defaults["study"], **study_config(tmp_path)["study"]}}
    cfg["study"]["normalizers"] = {"softmax": {"kind": "softmax"}}
    cfg["study"]["baseline"] = "softmax"
    assert study_errors(cfg) == []
    cfg["study"]["evaluation"] = {**cfg["study"]["evaluation"], "contexts": [64, 32]}
    assert study_errors(cfg) == []  # sorted: 32, the training context, comes first
    cfg["study"]["evaluation"]["contexts"] = [64]
    cfg["study"]["relax_ratio"] = 1.0
    assert study_errors(cfg) == [
        "study.evaluation.contexts: the smallest, 64, must be study.training.context=32 (length "
        "generalisation compares the longer contexts with it)",
        "study.relax_ratio: 1.0 must be above 1",
    ]


@pytest.mark.workflow
def test_bad_study_settings_are_refused_by_key(tmp_path):
    cfg = study_config(tmp_path, softmax={"kind": "softermax"})
    cfg["study"]["evaluation"]["contexts"] = [32, 128]
    proc = snakemake(tmp_path, write_config(tmp_path, cfg), "study", "-n", check=False)
    assert proc.returncode != 0
    err = proc.stderr
    assert "study.normalizers.softmax: unknown attention rule 'softermax'" in err
    assert "study.baseline: 'softmax' is not one of" not in err  # softmax is there
    assert "study.evaluation.contexts[1]: 128 exceeds study.architecture.max_positions=64" in err


def new_models(dry_run: str) -> list[str]:
    """The models a dry run's train_model jobs would train (their model wildcards), each once:
    a dry run through a checkpoint can print a job again when it re-evaluates the DAG (seen in
    CI on 2026-11-28: two of four models listed twice), which trains nothing twice. A job ends
    where the next begins, a checkpoint's too: a train_model job followed by seed 0's
    chunk_corpus checkpoint read that checkpoint's wildcards as its own (2026-11-29)."""
    found = []
    for job in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) \w+:)", dry_run):
        if re.match(r"(?:local)?rule train_model:", job.strip()):
            found += re.findall(r"wildcards: model=(\S+)", job)
    return list(dict.fromkeys(found))


@pytest.mark.workflow
def test_a_new_seed_trains_only_its_own_models(tmp_path):
    """The models are keyed by their seed: with seed 0's models trained, adding seed 1 plans the
    training of seed 1's models and of no other (seed 0's parameters do not change)."""
    rules = {"softmax": {"kind": "softmax"}, "sink": {"kind": "softmax_sink"}}
    one = study_config(tmp_path, **rules)
    one["study"]["training"]["steps"] = 2
    snakemake(
        tmp_path,
        write_config(tmp_path, one),
        *[f"resources/models/study-{n}-seed0" for n in rules],
        "--cores",
        "1",
    )
    proc = snakemake(tmp_path, write_config(tmp_path, one), "study", "-n")
    assert new_models(proc.stdout) == []  # seed 0's models are up to date
    two = {**one, "study": {**one["study"], "seeds": [0, 1]}}
    proc = snakemake(tmp_path, write_config(tmp_path / "two", two), "study", "-n")
    assert sorted(new_models(proc.stdout)) == ["study-sink-seed1", "study-softmax-seed1"]


# The end-to-end study with each rule's untrained model too (study.untrained_seeds: [0]): about
# 140 s more than without on 2 cores, so CI runs it without; ATTNLIMITS_STUDY_UNTRAINED=1 adds them.
UNTRAINED = os.environ.get("ATTNLIMITS_STUDY_UNTRAINED") == "1"


@pytest.mark.workflow
def test_study_end_to_end_and_one_changed_rule_retrains_one_model(tmp_path):
    rules = {
        "softmax": {"kind": "softmax"},
        "sparsemax": {"kind": "sparsemax"},
        "ssmax": {"kind": "scalable_softmax"},
        "gated": {"kind": "gated_softmax"},
    }
    two_seeds = study_config(tmp_path, **rules)
    two_seeds["study"]["seeds"] = [0, 1]
    two_seeds["study"]["untrained_seeds"] = [0] if UNTRAINED else []
    config = write_config(tmp_path, two_seeds)
    snakemake(tmp_path, config, "study", "--cores", "2")
    # over the seeds: a mean and a t-interval per measure, verdicts only on intervals apart
    over = pl.read_csv(tmp_path / "tables" / "study" / "normalizer_limits_seeds.csv")
    # the rows come in the models' order (by name: gated before softmax), so compare by name
    assert sorted(over["normalizer"].to_list()) == sorted(rules) and set(over["seeds"]) == {2}
    others = over.filter(~pl.col("normalizer").is_in(["softmax", "gated"]))
    # each cell's tests, and its comparison on the untrained weights (study.untrained_seeds)
    assert {"vanishing_p", "vanishing_sign_p", "vanishing_dropped_by_fdr"} <= set(over.columns)
    # review 37: a critical N known to its list cells has its upper ends' mean beside the low
    # ends' (the study's list walk: every found N_crit is a cell's top)
    both = over.select("distance_mean", "distance_upper_mean").drop_nulls().drop_nans()
    assert (both["distance_upper_mean"] >= both["distance_mean"]).all()
    if UNTRAINED:
        assert others["vanishing_untrained_verdict"].is_not_null().all()
        assert (tmp_path / "resources/models/study-ssmax-init0").is_dir()
    assert (over["vanishing_low"] <= over["vanishing_mean"]).all()
    assert (over["vanishing_mean"] <= over["vanishing_high"]).all()
    allowed = {study.RELAXES, study.TIGHTENS, study.NO_DIFFERENCE, study.SUPPORT_LIMITED}
    assert set(others["vanishing_verdict"].to_list()) <= allowed
    assert over.filter(pl.col("normalizer") == "softmax")["vanishing_verdict"][0] == "baseline"
    # the paired ratio each verdict reads: an interval around its ratio where there is one
    ratios = over.filter(pl.col("vanishing_ratio").is_not_nan())
    assert (ratios["vanishing_ratio_low"] <= ratios["vanishing_ratio"]).all()
    assert (ratios["vanishing_ratio"] <= ratios["vanishing_ratio_high"]).all()
    # gated attention: softmax's rule, but its own learnt logits: verdicts like any rule; its
    # cost and sink are paired differences to softmax's
    gated = over.filter(pl.col("normalizer") == "gated").row(0, named=True)
    assert {gated["vanishing_verdict"], gated["separability_verdict"]} <= allowed
    assert gated["lemma1"].startswith("none")
    assert gated["perplexity_cost_low"] <= gated["perplexity_cost_mean"]
    assert gated["perplexity_cost_verdict"] in {study.HIGHER, study.LOWER, study.NO_DIFFERENCE}
    assert (
        over.filter(pl.col("normalizer") == "softmax")["perplexity_cost_verdict"][0] == "baseline"
    )
    # the sink: first-token weight x L at the training context (32 here), a weight <= 1
    assert ((over["sink_mean"] > 0) & (over["sink_mean"] <= 32)).all()
    table = pl.read_csv(tmp_path / "tables" / "study" / "normalizer_limits.csv")
    assert sorted(table["normalizer"].to_list()) == sorted(rules)
    assert table.filter(pl.col("normalizer") == "softmax")["vanishing_verdict"][0] == "baseline"
    # the trained-T gradient gets no verdict; the critical N's censored lengths are counted
    assert dict(table.select("normalizer", "gradient_verdict").iter_rows()) == {
        "softmax": "baseline",
        "sparsemax": study.NO_VERDICT,
        "ssmax": study.NO_VERDICT,
        "gated": study.NO_VERDICT,
    }
    assert ((table["first_token_weight"] > 0) & (table["first_token_weight"] <= 32)).all()
    assert set(table["gradient_low_t_verdict"].to_list()) <= {*study.VERDICTS, "baseline"}
    assert (table["critical_n_censored"] <= table["critical_n_lengths"]).all()
    assert (table["distance"] <= table["distance_upper"]).all()
    page = (tmp_path / "docs" / "study.md").read_text()
    assert "Benjamini-Hochberg" in page and ("; untrained (seed 0): " in page) == UNTRAINED
    assert "[[" not in page and "| sparsemax |" in page
    assert "Every normalizer is trained once per seed (0, 1;" in page
    assert "### Seed 0's models" in page and "Its cells give the measures only" in page
    assert (
        "### How each measure is oriented" in page
        and study.LIMITS["distance"].quotes[0].text in page
    )
    assert re.search(r"Censored lengths per model:\s+gated \d+ of 4, softmax \d+ of 4,", page)
    assert "No verdict, both readings defensible" in page
    assert "## Which rule to use when" in page and "- **When the attention sink must go**" in page
    assert "Gated attention forms its weights with softmax's rule** (gated)" in page
    assert (tmp_path / "docs" / "study" / "normalizer_limits.png").stat().st_size > 10_000
    # N* of every rule and seed at both contexts, over the seeds with paired ratios to softmax
    n_star = pl.read_csv(tmp_path / "tables" / "study" / "effective_set.csv")
    assert n_star.height == len(rules) * 2 and set(n_star["length"]) == {32, 64}
    assert set(n_star["seeds"]) == {2}
    assert set(n_star.filter(pl.col("normalizer") == "softmax")["verdict"]) == {"baseline"}
    assert set(n_star.filter(pl.col("normalizer") != "softmax")["verdict"]) <= {
        "fewer keys",
        "more keys",
        study.NO_DIFFERENCE,
        "no difference shown (the windows' intervals overlap in a seed)",
        study_effective_set.NO_WINDOW_INTERVAL,
        study_effective_set.AT_FLOOR,
    }
    assert (n_star["base_nll_per_target"] > 0).all()
    assert ((n_star["n_star_mean"] >= 1) & (n_star["n_star_mean"] <= n_star["length"])).all()
    per_seed = pl.read_csv(tmp_path / "tables" / "study" / "effective_set_per_seed.csv")
    assert per_seed.height == len(rules) * 2 * 2 and not per_seed["censored"].any()
    windows = pl.read_parquet(tmp_path / "results/study-softmax-seed0/effective_set/tokens.parquet")
    assert windows["chunk"].n_unique() == 2 and windows.height == 2 * 64
    assert "## How many keys each model needs: N*" in page and "| sparsemax | " in page
    assert re.search(r"softmax needs N\* = [\d.]+ of L = 32 keys", page)
    assert "## The gradient against temperature" in page and "## Heads and multi-head" in page
    # the Jacobian sweep: every T, the bound checked where one is known, ssmax's per row
    sweep = {
        n: pl.read_parquet(tmp_path / f"results/study-{n}-seed0/study/gradient.parquet")
        for n in rules
    }
    assert sweep["softmax"]["T"].n_unique() == len(DEFAULT_TEMPERATURES)
    for n, g in sweep.items():
        assert not g["violated"].any(), n
        assert g["bound"].is_finite().all(), n
    assert sweep["ssmax"]["bound"].n_unique() > len(DEFAULT_TEMPERATURES)  # per head
    assert table["gradient_bound_violations"].to_list() == [0, 0, 0, 0]
    heads = pl.read_csv(tmp_path / "tables/study-sparsemax-seed0/heads.csv")
    assert heads.height == ARCH["layers"] * ARCH["heads"]
    assert (tmp_path / "figures/study-ssmax-seed0/coverage.png").exists()
    learned = json.loads((tmp_path / "resources/models/study-ssmax-seed0/learned.json").read_text())
    assert len(learned["s"]) == ARCH["layers"] and len(learned["s"][0]) == ARCH["heads"]
    # Training repeats itself byte for byte.
    first = (tmp_path / "resources/models/study-sparsemax-seed0/model.safetensors").read_bytes()
    changed = study_config(
        tmp_path, **{**rules, "sparsemax": {"kind": "sparsemax", "temperature": 2.0}}
    )
    changed["study"]["seeds"] = [0, 1]
    changed["study"]["untrained_seeds"] = two_seeds["study"]["untrained_seeds"]
    config = write_config(tmp_path / "changed", changed)
    planned = planned_rules(tmp_path, config, "study")
    # sparsemax's models only: one per seed, and its untrained one (no head report: untrained)
    models = 3 if UNTRAINED else 2
    assert planned.count("train_model") == models, planned
    assert planned.count("evaluate_model") == models and planned.count("normalizer") == models
    assert planned.count("study_gradient") == models and planned.count("heads") == 2, planned
    # a third seed trains its own three models only
    more = study_config(tmp_path, **rules)
    more["study"]["seeds"] = [0, 1, 2]
    more["study"]["untrained_seeds"] = two_seeds["study"]["untrained_seeds"]
    proc = snakemake(tmp_path, write_config(tmp_path / "more", more), "study", "-n")
    assert sorted(new_models(proc.stdout)) == [f"study-{n}-seed2" for n in sorted(rules)]
    same = write_config(tmp_path / "again", two_seeds)
    snakemake(
        tmp_path,
        same,
        "resources/models/study-sparsemax-seed0",
        "--cores",
        "1",
        "--forcerun",
        "train_model",
    )
    again = (tmp_path / "resources/models/study-sparsemax-seed0/model.safetensors").read_bytes()
    assert again == first


@pytest.mark.unit
def test_separability_of_a_rule_whose_support_is_below_n_gets_no_verdict():
    """A sparse rule whose rows carry fewer nonzero weights than N: its N_s/N is capped by
    support / N (weight-0 tokens are never distinguishable), which measures the support, not
    separability: no verdict, whatever the ratio against softmax."""
    base = {"separability": 0.5, "separability_zero_weight": 0.0}
    sparse = {"separability": 0.05, "separability_zero_weight": 0.9}  # 90% of slots weigh 0
    dense_low = {"separability": 0.05, "separability_zero_weight": 0.0}
    found = study.verdicts(
        {"softmax": base, "sparse": sparse, "dense_low": dense_low}, "softmax", 1.5
    )
    assert found["sparse"]["separability"] == study.SUPPORT_LIMITED
    assert found["dense_low"]["separability"] == "tightens"


# ------------------------------------------------------------------------------ over the seeds
@pytest.mark.unit
def test_t_interval_by_hand():
    # values 1, 2, 3: mean 2, sd 1, t_{0.975, 2} = 4.302653: 2 +- 4.302653 / sqrt(3)
    mean, low, high = intervals.t_interval([1.0, 2.0, 3.0], 0.95)
    assert mean == 2.0
    assert high - mean == pytest.approx(4.302652729911275 / math.sqrt(3), rel=1e-9)
    assert mean - low == pytest.approx(high - mean)
    one = intervals.t_interval([5.0], 0.95)
    assert one[0] == 5.0 and math.isnan(one[1]) and math.isnan(one[2])


@pytest.mark.unit
def test_log_t_interval_by_hand():
    # logs 0, ln 10, ln 100: mean ln 10, sd ln 10; back-transformed, a geometric interval
    mean, low, high = intervals.log_t_interval([1.0, 10.0, 100.0], 0.95)
    assert mean == pytest.approx(10.0)
    half = 4.302652729911275 * math.log(10.0) / math.sqrt(3)
    assert low == pytest.approx(10.0 * math.exp(-half)) and high == pytest.approx(
        10.0 * math.exp(half)
    )
    assert low > 0  # never below 0, where the raw t-interval of these seeds would reach


@pytest.mark.unit
def test_seed_order_names_a_rule_whose_every_seed_is_beyond_the_baselines():
    base = study_seeds.SeedMeasure(0.4, 0.3, 0.5, 3, "baseline", values=(0.41, 0.39, 0.40))
    below = study_seeds.SeedMeasure(
        0.05, 1e-4, 20.0, 3, study.NO_DIFFERENCE, values=(0.0015, 0.1, 0.2)
    )
    mixed = study_seeds.SeedMeasure(0.4, 0.1, 0.9, 3, study.NO_DIFFERENCE, values=(0.1, 0.45, 0.9))
    # the side is read off the data, and the seeds pair (review 16): 2 / 2^3 = 0.25
    assert study_prose.seed_order(below, base, "softmax") == (
        "every seed below softmax's, paired p = 0.25"
    )
    assert study_prose.seed_order(mixed, base, "softmax") == ""
    # review 10: a censored measure's values are lower ends: "below" is not known, "above" is
    censored = dataclasses.replace(below, lower_bound=True)
    assert study_prose.seed_order(censored, base, "softmax") == ""
    base_censored = dataclasses.replace(base, lower_bound=True)
    assert study_prose.seed_order(below, base_censored, "softmax") == (
        "every seed below softmax's, paired p = 0.25"
    )
    above = study_seeds.SeedMeasure(0.9, 0.8, 1.0, 3, study.NO_DIFFERENCE, values=(0.8, 0.9, 1.0))
    assert study_prose.seed_order(above, base_censored, "softmax") == ""
    assert study_prose.seed_order(dataclasses.replace(above, lower_bound=True), base, "softmax")


@pytest.mark.unit
def test_paired_ratio_by_hand_and_its_verdict():
    # ratios 4, 5, 6.25 seed by seed: logs ln 4 + (0, ln 1.25, 2 ln 1.25); geometric mean 5
    r, low, high = intervals.paired_ratio((0.4, 0.5, 0.625), (0.1, 0.1, 0.1), 0.95)
    assert r == pytest.approx(5.0)
    half = 4.302652729911275 * math.log(1.25) / math.sqrt(3)
    assert (low, high) == (pytest.approx(5 * math.exp(-half)), pytest.approx(5 * math.exp(half)))
    assert study_seeds.ratio_verdict(low, high, 1.5, "larger") == study.RELAXES
    assert study_seeds.ratio_verdict(low, high, 1.5, "smaller") == study.TIGHTENS
    assert study_seeds.ratio_verdict(0.8, 1.6, 1.5, "larger") == study.NO_DIFFERENCE
    # shares compare odds; a share at 0 or 1, one pair, or a non-positive value: no ratio
    r, _, _ = intervals.paired_ratio((0.5, 0.5), (0.2, 0.2), 0.95, share=True)
    assert r == pytest.approx(4.0)
    assert math.isnan(intervals.paired_ratio((1.0, 0.5), (0.2, 0.2), 0.95, share=True)[0])
    assert math.isnan(intervals.paired_ratio((0.5,), (0.2,), 0.95)[0])
    assert math.isnan(intervals.paired_ratio((0.5, 0.0), (0.2, 0.2), 0.95)[0])


@pytest.mark.unit
def test_paired_seeds_find_a_shift_their_unpaired_intervals_miss():
    """The seeds share a spread (seed 2 runs high for every rule): unpaired, the two intervals
    of three seeds overlap; paired by seed, the rule is 4.8-5.2x the baseline every time."""
    base = [0.02, 0.03, 0.09]
    per_seed = {
        "softmax": [{"vanishing": v} for v in base],
        "rule": [{"vanishing": v * k} for v, k in zip(base, (4.8, 5.0, 5.2), strict=True)],
    }
    got = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)["rule"]["vanishing"]
    unpaired = study.verdict(
        (got.low, got.high),
        intervals.log_t_interval(base, 0.95)[1:],
        1.5,
        "larger",
    )
    assert unpaired != study.RELAXES and got.verdict == study.RELAXES
    assert got.ratio == pytest.approx(5.0, rel=1e-3) and got.ratio_low > 4
    assert "paired ratio x5" in study_prose.shown_over_seeds(got)


@pytest.mark.unit
def test_verdicts_over_seeds_need_intervals_apart():
    def seeds(*values, key="vanishing"):
        return [{key: v, "perplexity": 10.0} for v in values]

    per_seed = {
        "softmax": seeds(0.10, 0.11, 0.12),
        "far": seeds(0.50, 0.52, 0.54),  # interval ~[0.47, 0.57] >= 1.5 x ~0.135
        "near": seeds(0.14, 0.15, 0.16),  # means 1.36x apart: no verdict
        "wide": seeds(0.05, 0.40, 0.90),  # mean 3x the baseline's, but its interval is wide
        # a tenth of the baseline with its own spread (a ratio equal on every seed has none for
        # a t-test: its p is the exact 0.25)
        "low": seeds(0.01, 0.012, 0.0115),
    }
    got = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)
    assert got["softmax"]["vanishing"].verdict == "baseline"
    assert got["far"]["vanishing"].verdict == study.RELAXES
    assert got["near"]["vanishing"].verdict == study.NO_DIFFERENCE
    assert got["wide"]["vanishing"].verdict == study.NO_DIFFERENCE
    assert got["low"]["vanishing"].verdict == study.TIGHTENS
    far = got["far"]["vanishing"]
    # a positive measure: the geometric mean, its interval on the log scale
    assert far.log_scale and far.mean == pytest.approx((0.50 * 0.52 * 0.54) ** (1 / 3))
    assert far.low < far.mean < far.high and far.seeds == 3 and far.values == (0.50, 0.52, 0.54)
    assert got["far"]["perplexity"].verdict == ""  # the cost: a number, no verdict
    # the orientation-free limit, a missing measure, one seed
    assert got["far"]["gradient"].verdict == study.NO_VERDICT
    assert got["far"]["length"].verdict == study.NOT_MEASURED
    single = study_seeds.seed_measures(
        {"softmax": seeds(0.1), "far": seeds(0.5)}, "softmax", 1.5, 0.95
    )
    assert single["far"]["vanishing"].verdict == study.ONE_SEED
    assert study_prose.shown_over_seeds(single["far"]["vanishing"]) == "0.5"
    assert study_prose.shown_over_seeds(far).startswith("0.52 [")


@pytest.mark.unit
def test_a_censored_measure_over_seeds_spans_its_lower_and_upper_ends():
    per_seed = {
        # as many seeds as "c": the cost and the sink are paired by seed
        "softmax": [{"distance": 0.1, "distance_upper": 0.1}]
        + [{"distance": 0.12, "distance_upper": 0.12}],
        "c": [{"distance": 0.2, "distance_upper": 0.9}, {"distance": 0.21, "distance_upper": 0.8}],
    }
    got = study_seeds.seed_measures(per_seed, "softmax", 1.5, 0.95)["c"]["distance"]
    assert got.mean == pytest.approx(0.205)
    assert got.high > 0.8  # the upper ends' interval


# ------------------------------------------------------------------------------ training device
@pytest.mark.integration
def test_the_training_device_setting_reaches_the_model_and_the_batches(corpus_ids, monkeypatch):
    ids, vocab, _ = corpus_ids
    asked, seen = [], []
    real = training.training_device

    def spy(name="cpu"):
        asked.append(name)
        return real("cpu")  # no GPU here: the named device's tensors land on the CPU

    monkeypatch.setattr(training, "training_device", spy)
    model = training.build_model(ARCH, RULES["sink"], vocab, 0, TRAIN["context"])
    model.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(
            (kwargs["input_ids"].device.type, next(m.parameters()).device.type)
        ),
        with_kwargs=True,
    )
    training.train(model, ids, {**TRAIN, "steps": 2, "device": "cuda"}, 0, log=lambda _: None)
    assert asked == ["cuda"] and seen == [("cpu", "cpu")] * 2
    assert all(p.device.type == "cpu" for p in model.parameters())  # back on the CPU


@pytest.mark.unit
def test_training_device_refuses_unknown_and_missing_devices():
    assert training.training_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="not cpu or cuda"):
        training.training_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="torch sees no GPU"):
            training.training_device("cuda")


@pytest.mark.integration
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_training_on_cuda_starts_from_the_same_weights_and_batches(corpus_ids):
    ids, vocab, _ = corpus_ids
    histories = {}
    for device in ("cpu", "cuda"):
        model = training.build_model(ARCH, RULES["ssmax"], vocab, 0, TRAIN["context"])
        settings = {**TRAIN, "steps": 5, "log_every": 1, "device": device}
        histories[device] = training.train(model, ids, settings, 0, log=lambda _: None)
        assert all(p.device.type == "cpu" for p in model.parameters())
    # the same initial weights and batches: the first step's loss agrees to float32 reordering
    assert histories["cuda"][0]["loss"] == pytest.approx(histories["cpu"][0]["loss"], rel=1e-4)


@pytest.mark.unit
def test_the_vanishing_column_reads_lemma_1s_rate_within_the_training_context():
    """Issue 46, point 6. Two models whose median peak weight is 0.1 at L = 512 alike: one
    decays as 1/L up to its training context (128), the other keeps its peak there and drops
    only beyond, where no position was trained. The level at 512 cannot tell them apart; the
    rate over L <= 128 does: relaxes."""

    def samples(peaks):
        lengths = (16, 32, 64, 128, 256, 512)
        return pl.DataFrame(
            {"L": list(lengths), "max_weight": peaks, "jacobian_norm": [0.1] * len(lengths)}
        )

    decays = samples([3.2, 1.6, 0.8, 0.4, 0.2, 0.1])  # 1/L throughout
    keeps = samples([0.5, 0.5, 0.5, 0.5, 0.2, 0.1])  # flat within 128, then falls
    critical = pl.DataFrame({"L": [16], "N_crit": [2]})
    separability = pl.DataFrame({"N": [4], "ratio": [0.5]})
    evaluation = {"contexts": [{"context": 128, "perplexity": 10.0, "tail_perplexity": 10.0}]}
    base, rule = (
        study.limit_measures(s, critical, separability, evaluation, None, 128)
        for s in (decays, keeps)
    )
    assert base["vanishing_level"] == rule["vanishing_level"] == pytest.approx(0.1)
    assert base["vanishing"] == pytest.approx(16 / 128) and rule["vanishing"] == pytest.approx(1.0)
    assert base["vanishing_fit_slope"] == pytest.approx(-1.0)
    found = study.verdicts({"softmax": base, "rule": rule}, "softmax", 1.5)
    assert found["rule"]["vanishing"] == study.RELAXES


@pytest.mark.unit
def test_the_vanishing_rate_is_not_measured_beyond_the_training_context():
    """One analysed L within the training context: no slope there, and a fit beyond it would
    read extrapolation, so the measure is missing, not the slope over L = 64..512."""
    per_l = pl.DataFrame({"L": [64, 128, 256, 512], "max_weight": [0.5, 0.3, 0.2, 0.1]})
    got = study.vanishing_decay(per_l, 64)
    assert got["vanishing"] is None and got["vanishing_fit_lengths"] == (None, None)
    assert study.vanishing_decay(per_l, None)["vanishing_fit_lengths"] == (64, 512)


@pytest.mark.unit
def test_the_vanishing_factor_spans_one_range_for_every_rule():
    """Review 23 (5): the factor took its range over every length while the slope left out a
    median peak of 0. Review 24 (1): dropping that length gave one rule another span than the
    baseline's, and two rules decaying alike as 1/L compared as "relaxes". Every factor spans the
    analysed lengths; a rule with a median peak of 0 at one of them is not measured."""
    decaying = pl.DataFrame({"L": [16, 32, 64, 128], "max_weight": [1.0, 0.5, 0.25, 0.125]})
    base = study.vanishing_decay(decaying, None)
    assert base["vanishing_fit_lengths"] == (16, 128)
    assert base["vanishing"] == pytest.approx(0.125)
    zero = pl.DataFrame({"L": [16, 32, 64, 128], "max_weight": [0.0, 0.5, 0.25, 0.125]})
    got = study.vanishing_decay(zero, None)
    assert got["vanishing"] is None and got["vanishing_fit_lengths"] == (None, None)
    found = study.verdicts({"softmax": base, "rule": got}, "softmax", 1.5)
    assert found["rule"]["vanishing"] != study.RELAXES
    # review 25: a NaN or missing median is no logarithm either
    for missing in (float("nan"), None):
        gap = pl.DataFrame(
            {"L": [16, 32, 64, 128], "max_weight": [missing, 0.5, 0.25, 0.125]},
            schema={"L": pl.Int64, "max_weight": pl.Float64},
        )
        assert study.vanishing_decay(gap, None)["vanishing"] is None


@pytest.mark.unit
def test_the_study_names_its_comparator_beside_the_papers_share():
    """Review 23 (3): the study's N_crit is searched against the Monte-Carlo E, the paper's
    0.06 L against the printed Theorem 1.2 term; the page set one beside the other unnamed."""
    template = (REPO / "workflow" / "resources" / "study_template.md").read_text()
    at = template.index("[[baseline_distance_vs_paper]]")
    assert "against the Monte-Carlo E, not the paper's printed Theorem 1.2 term" in " ".join(
        template[at : at + 400].split()
    )


@pytest.mark.unit
def test_the_slope_over_every_length_reads_every_length():
    """Review 27 (2): the study's "max-weight slope over every L" column fitted over the lengths
    with a positive median peak and printed -1.00 for a rule whose peak collapses to 0."""
    collapse = pl.DataFrame({"L": [16, 32, 64, 128, 256], "max_weight": [0.5, 0.25, 0.125, 0, 0]})
    assert math.isnan(study.slope_over_every_length(collapse))
    decay = pl.DataFrame({"L": [16, 32, 64], "max_weight": [0.5, 0.25, 0.125]})
    assert study.slope_over_every_length(decay) == pytest.approx(-1.0)


@pytest.mark.unit
def test_at_n_equal_l_d_tilde_meets_its_expectation_only_without_zero_weights():
    """Review 32: the censored share's cap of 1 (N_crit = L) rests on d~ = E at N = L, which
    holds where every key has a weight > 0; a zero weight under "not_selected" leaves the key
    unselected in both, at ||s|| from s in d~ but not in every random set's sum."""
    from attnlimits import distance as dist
    from attnlimits.critical import BlockedDistances

    rng = np.random.default_rng(0)
    L = 16
    weights = rng.dirichlet(np.ones(L), size=20)
    x = rng.normal(size=(20, L, 4))

    def gap(w):
        pw = dist.weighted(w, x, zero_weight="not_selected")
        blocked = BlockedDistances([(slice(0, 20), pw)], 20)
        d = blocked.distance(L)
        e = blocked.monte_carlo(L, 2, np.random.default_rng(1))
        return float(np.abs(d - e).max())

    assert gap(weights) == 0.0
    sparse = weights.copy()
    sparse[:, :5] = 0.0
    sparse /= sparse.sum(axis=1, keepdims=True)
    assert gap(sparse) > 1.0


@pytest.mark.workflow
def test_a_study_model_has_no_table1(tmp_path):
    """Review 46: the paper's bound checks assume softmax rows (weights >= 0 summing to one);
    a study model's sigmoid or softpick rows need not be, so Theorem 1.1 would read "vacuous
    (proved)" where it could fail. Table 1 is refused for study models, not built wrong."""
    cfg = study_config(tmp_path, softmax={"kind": "softmax"}, sigmoid={"kind": "sigmoid_attention"})
    config = write_config(tmp_path, cfg)
    proc = snakemake(tmp_path, config, "tables/study-sigmoid-seed0/table1.csv", "-n", check=False)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    assert "MissingRuleException" in said and "study-sigmoid-seed0/table1.csv" in said
