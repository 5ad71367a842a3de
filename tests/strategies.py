"""Hypothesis strategies for attention samples: weights on the simplex and embeddings."""

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

# The fuzzers' settings (each adds its own max_examples): a fixed seed and no example database,
# so CI tries the same cases every run; no deadline and no health checks, since a case may load a
# configuration or write and read files.
FUZZ_SETTINGS = settings(
    derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)

finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def attention_samples(draw, min_len=2, max_len=9, max_samples=3, max_dim=4):
    """(alpha (S, L), x (S, L, d)) with alpha rows on the simplex (ties allowed)."""
    s = draw(st.integers(1, max_samples))
    length = draw(st.integers(min_len, max_len))
    d = draw(st.integers(1, max_dim))
    # Integer-valued logits make exact ties common, which is where selection rules break.
    logits = draw(arrays(np.float64, (s, length), elements=st.integers(-4, 4).map(float)))
    temp = draw(st.sampled_from([0.3, 1.0, 3.0]))
    z = np.exp((logits - logits.max(axis=1, keepdims=True)) / temp)
    alpha = z / z.sum(axis=1, keepdims=True)
    x = draw(arrays(np.float64, (s, length, d), elements=finite))
    return alpha, x


# ---- configurations derived from the schema (tests/test_fuzz.py) ----

# Strings a user, a typo or an attacker may put anywhere: path escapes, hidden and option-like
# names, separators, templates, NULs, control and non-ASCII characters, overlong, YAML words.
HOSTILE_STRINGS = [
    "",
    " ",
    ".",
    "..",
    "../..",
    "../../etc/passwd",
    "/",
    "-rf",
    "--help",
    ".hidden",
    "a/b",
    "a\\b",
    "{model}",
    "${HOME}",
    "*",
    "?",
    "\x00",
    "a\x00b",
    "\n",
    "\t",
    "é",
    "\u202e",
    "x" * 65,
    "x" * 300,
    "ab" * 20,
    "null",
    "~",
    "true",
    "1e309",
    "nan",
    "-1",
    "0x10",
    "study-softmax",
    "compare",
    "a.gguf",
]


def schema_leaves(schema: dict, node: dict | None = None, path: tuple = ()):
    """(key path, schema node) of every property the schema names, objects included, resolving
    $ref; a mapping of names (additionalProperties) yields its own path once."""
    node = node if node is not None else schema
    if "$ref" in node:
        target = schema
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if path:
        yield path, node
    for key, sub in (node.get("properties") or {}).items():
        yield from schema_leaves(schema, sub, (*path, key))


def _bounds(node: dict) -> list:
    """Numbers at and just past the node's limits, and far beyond them."""
    out = []
    for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        if key in node:
            v = node[key]
            out += [v - 1, v, v + 1, v - 1e-9, v + 1e-9]
    return out + [0, -1, 2**31, 2**63, 10**30, 1e308, -1e308, 1e-320]


def values_for(node: dict):
    """A value for a key of this schema node: often wrong (another type, out of range, hostile),
    sometimes right (an enum member, a small number in range)."""
    wrong = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**20), 10**20),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(HOSTILE_STRINGS),
        st.text(max_size=12),
        st.lists(st.one_of(st.integers(-3, 70), st.sampled_from(HOSTILE_STRINGS)), max_size=4),
        st.dictionaries(st.sampled_from(HOSTILE_STRINGS), st.integers(-2, 3), max_size=2),
    )
    types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if "string" in types:  # paths and names: mostly hostile strings
        wrong = st.one_of(st.sampled_from(HOSTILE_STRINGS), wrong)
    near = [st.sampled_from(_bounds(node))]
    if "enum" in node:
        near.append(st.sampled_from(node["enum"]))
    if node.get("type") == "array":
        item = node.get("items", {})
        bounds = _bounds(item) + list(item.get("enum", [])) + [1, 2, 4, 8, 16, 32, 64]
        near.append(st.lists(st.sampled_from(bounds), max_size=6))
    return st.one_of(wrong, *near)


@st.composite
def mutated_configs(draw, schema: dict, base: dict, max_mutations: int = 3):
    """``base`` (a valid config) with 1 to ``max_mutations`` of: a key set to values_for(its
    schema), an unknown key added, a key removed, a hostile name at a key that names a folder."""
    import copy

    leaves = list(schema_leaves(schema))
    cfg = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_mutations))):
        path, node = draw(st.sampled_from(leaves))
        kind = draw(st.sampled_from(["set", "set", "set", "unknown", "remove", "name"]))
        parent = cfg
        for key in path[:-1]:
            if not isinstance(parent.get(key), dict):
                parent[key] = {}
            parent = parent[key]
        last = path[-1]
        if kind == "set":
            parent[last] = draw(values_for(node))
        elif kind == "unknown":
            target = parent[last] if isinstance(parent.get(last), dict) else parent
            target[draw(st.sampled_from(HOSTILE_STRINGS + ["colour", "n_chunk"]))] = draw(
                values_for({})
            )
        elif kind == "remove":
            parent.pop(last, None)
        else:
            name = draw(st.sampled_from(HOSTILE_STRINGS))
            where = draw(
                st.sampled_from(
                    [
                        "model.name",
                        "corpus.name",
                        "models",
                        "beyond.normalizers",
                        "study.normalizers",
                    ]
                )
            )
            section, _, field = where.partition(".")
            if not isinstance(cfg.get(section), dict):
                cfg[section] = {}
            if where == "models":
                cfg["models"] = {name: None}
            elif field == "name":
                cfg[section][field] = name
            else:
                cfg[section][field] = {name: {"kind": "softmax"}}
    return cfg
