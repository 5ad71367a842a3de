"""The rules' table (attnlimits.rules): every rule has both sides, the numpy what-if and the torch
forward a trained model runs, and the two give the same weights on the same logits."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlimits import attention_rules, rules
from attnlimits_workflow.study import LIMITS

KINDS = sorted(rules.RULES)


@pytest.mark.unit
def test_every_rule_has_both_sides_with_the_same_settings():
    # A rule added to one side only (the table, or attention_rules.FORWARDS) fails here.
    assert set(attention_rules.FORWARDS) == set(rules.RULES)
    for kind, rule in rules.RULES.items():
        assert rule.name == kind
        forward = inspect.signature(attention_rules.FORWARDS[kind]).parameters
        assert list(forward)[:2] == ["scores", "visible"], kind
        # the forward takes the what-if's settings (a learned one as its per-head values)
        assert set(list(forward)[2:]) == set(rule.settings), kind
        assert set(inspect.signature(rule.jacobian_norm).parameters) >= set(rule.settings), kind
        assert set(rule.targets) <= set(LIMITS), kind
        for p in rule.learned:
            assert p.name in rule.settings and p.init_setting not in rule.settings, kind
        assert rules.get(kind) is rule


@pytest.mark.unit
def test_settings_and_learned_parameters_by_hand():
    ssmax = rules.get("scalable_softmax")
    assert ssmax.settings == {"s": 0.43}
    assert ssmax.trained_settings == {"s_init"}
    assert [(p.name, p.attribute, p.init_setting) for p in ssmax.learned] == [
        ("s", "attention_scale", "s_init")
    ]
    assert ssmax.learned[0].init_default(np.e**2) == pytest.approx(0.5)
    assert rules.get("softmax").settings == {"temperature": 1.0}
    assert rules.get("self_adjust_softmax").settings == {}
    assert not rules.get("self_adjust_softmax").sums_to_one
    assert rules.trained_settings({"kind": "scalable_softmax", "s_init": 0.4}) == {"s_init": 0.4}
    with pytest.raises(ValueError, match="unknown settings"):
        rules.trained_settings({"kind": "scalable_softmax", "s": 0.4})
    with pytest.raises(ValueError, match="unknown attention rule"):
        rules.trained_settings({"kind": "softermax"})
    assert rules.what_if_entry({"kind": "scalable_softmax", "s_init": 0.4}) == {
        "kind": "scalable_softmax"
    }
    assert rules.what_if_entry({"kind": "softmax", "temperature": 2.0}) == {
        "kind": "softmax",
        "temperature": 2.0,
    }


@pytest.mark.unit
def test_targets_follow_the_papers_three_families():
    # Section 4: sparsity-inducing, length-aware, gradient-controlled; softmax is the baseline
    assert rules.get("softmax").targets == ()
    assert "length" in rules.get("scalable_softmax").targets
    assert "separability" in rules.get("scalable_softmax").targets
    assert "vanishing" in rules.get("sparsemax").targets
    assert "gradient_low_t" in rules.get("self_adjust_softmax").targets


# ------------------------------------------------------------- what-if == trained forward
@st.composite
def attention_case(draw):
    """(scores (heads, queries, keys), visible (queries, keys)) in float64: causal rows (the
    last queries of the keys) or any mask with one visible key per row at least, and logits with
    ties (values from a small set) or spread ones."""
    heads = draw(st.integers(1, 3))
    n_keys = draw(st.integers(1, 12))
    n_queries = draw(st.integers(1, n_keys))
    if draw(st.booleans()):
        values = st.sampled_from([-3.0, -0.5, 0.0, 0.5, 2.0])  # ties
    else:
        values = st.floats(-30.0, 30.0, allow_nan=False, allow_infinity=False)
    scores = np.array(
        draw(
            st.lists(
                values, min_size=heads * n_queries * n_keys, max_size=heads * n_queries * n_keys
            )
        )
    ).reshape(heads, n_queries, n_keys)
    if draw(st.booleans()):
        visible = attention_rules.visible_from_mask(None, True, n_queries, n_keys, "cpu")[0, 0]
        visible = visible.expand(n_queries, n_keys).numpy()
    else:
        bits = draw(
            st.lists(st.booleans(), min_size=n_queries * n_keys, max_size=n_queries * n_keys)
        )
        visible = np.array(bits).reshape(n_queries, n_keys)
        first = draw(st.lists(st.integers(0, n_keys - 1), min_size=n_queries, max_size=n_queries))
        visible[np.arange(n_queries), first] = True
    return scores, visible


@pytest.mark.integration
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=6, deadline=None)
@given(
    case=attention_case(),
    temperature=st.sampled_from([0.25, 1.0, 3.0]),
    learned_values=st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3),
)
def test_what_if_weights_equal_the_trained_forward(kind, case, temperature, learned_values):
    """For every rule of the table: the torch forward (attention_rules.normalize, what a trained
    model attends with) on a masked row equals the numpy weights (rules.get, the what-if) of
    its visible keys, with the row's own length, and is 0 on the masked keys."""
    scores, visible = case
    heads = scores.shape[0]
    rule = rules.get(kind)
    learned_names = {p.name for p in rule.learned}
    what_if = {k: v for k, v in rule.settings.items() if k not in learned_names}
    if "temperature" in what_if:
        what_if["temperature"] = temperature
    learned = {p: np.array(learned_values[:heads]) for p in learned_names}
    got = attention_rules.normalize(
        torch.from_numpy(scores),
        torch.from_numpy(visible),
        {"kind": kind, **what_if},
        {p: torch.from_numpy(v) for p, v in learned.items()},
    ).numpy()
    assert got.dtype == np.float64
    for h in range(heads):
        for t in range(scores.shape[1]):
            keys = np.flatnonzero(visible[t])
            row = scores[h, t, keys][None]
            arguments = {**what_if, **{p: float(v[h]) for p, v in learned.items()}}
            want = rules.get(kind).weights(row, keys.size, **arguments)[0]
            np.testing.assert_allclose(got[h, t, keys], want, rtol=1e-9, atol=1e-12)
            assert np.all(got[h, t, ~visible[t]] == 0.0)


@pytest.mark.integration
def test_what_if_equals_the_forward_on_a_hand_row():
    # One causal row of three keys, s = 0.5: softmax(0.5 log(3) z) both ways.
    z = np.array([1.0, 1.0, -2.0])
    want = np.exp(0.5 * np.log(3) * z) / np.exp(0.5 * np.log(3) * z).sum()
    got = attention_rules.normalize(
        torch.tensor(z).view(1, 1, 3),
        torch.ones(1, 3, dtype=torch.bool),
        {"kind": "scalable_softmax"},
        {"s": torch.tensor([0.5], dtype=torch.float64)},
    )[0, 0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(rules.get("scalable_softmax").weights(z[None], 3, s=0.5)[0], want)
    with pytest.raises(ValueError, match="needs the learned s"):
        attention_rules.normalize(
            torch.tensor(z).view(1, 1, 3),
            torch.ones(1, 3, dtype=torch.bool),
            {"kind": "scalable_softmax"},
        )
