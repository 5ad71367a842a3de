"""The analyses' registry (attnlimits_workflow.registry): every record's module has the entry
points its fields promise, every claim of the paper's card is scored by exactly one analysis,
and planning can import it without numpy, polars or torch."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import yaml
from project import REPO

from attnlimits_workflow import engine, registry

pytestmark = pytest.mark.unit


def module_of(name: str):
    return importlib.import_module(f"attnlimits_workflow.analyses.{name}")


@pytest.mark.parametrize("record", registry.REGISTRY, ids=lambda a: a.name)
def test_each_records_module_has_what_the_record_promises(record):
    module = module_of(record.name)
    promised = {
        "run": record.per_length,
        "summarise": record.generic_summary,
        "score": bool(record.claims),
        "figure": record.figure is not None,
        "engine_kernels": record.row_values is not None,
        "engine_tables": record.row_values is not None,
    }
    for entry, needed in promised.items():
        if needed:
            assert callable(getattr(module, entry, None)), f"{record.name}.{entry}"
    if record.figure is not None:
        assert registry.caption(record.figure).strip()
    if not record.generic_summary and record.bound_checks:
        # a summary rule of its own (workflow/scripts/summarise.py) with its Table 1 replicates
        assert callable(getattr(module, "summarise_inputs", None)), record.name
        assert getattr(module, "REPLICATED_FROM", None) is not None, record.name
    if record.generic_summary and record.claims:
        # Table 1 reads its interval from the replicates the generic summary rule writes
        assert getattr(module, "REPLICATED", None) is not None, record.name


def test_every_claim_of_the_card_is_scored_by_one_analysis():
    """Each claim id is one analysis's: the paper's card (paper_claims.yaml) and the claims a
    module adds of its own (its CLAIMS) together are exactly the records' claims."""
    card = yaml.safe_load((REPO / "workflow/resources/paper_claims.yaml").read_text())
    own = {c for a in registry.REGISTRY for c in getattr(module_of(a.name), "CLAIMS", {})}
    claimed = [c for a in registry.REGISTRY for c in a.claims]
    assert len(claimed) == len(set(claimed))
    # "bounds" holds the bound checks' settings: every bound check is a row of its own
    assert (set(card) - {"bounds"}) | own == set(claimed)
    assert registry.CLAIM_SUMMARIES == {c: a.name for a in registry.REGISTRY for c in a.claims}


def test_the_paper_analyses_keep_their_order():
    """Table 1's rows, its bound rows and the engine's passes follow the paper's analyses in this
    order; an analysis added later comes after them."""
    paper = ["distance", "critical_n", "separability", "gradient", "vanishing"]
    assert registry.SCORED[:5] == paper
    assert registry.BOUND_CHECKS[:4] == ["distance", "separability", "gradient", "vanishing"]
    assert registry.PER_LENGTH[:2] == ["critical_n", "vanishing"]
    assert registry.GENERIC_SUMMARIES[:1] == ["vanishing"]
    assert registry.FIGURES["fig4"] == "gradient"
    assert engine.ROW_ANALYSES is registry.ROW_ANALYSES
    assert list(registry.ROW_ANALYSES)[:4] == ["distance", "critical_n", "separability", "gradient"]
    assert registry.READING_KEYS_READ["vanishing"] == frozenset()
    assert registry.READING_KEYS_READ["gradient"] == {"temperature_on"}


def test_each_compared_analysis_has_a_panel():
    """figures/compare/<name>.pdf is drawn by assemble.compare_figure, which names each panel's
    interval column: a record that asks for a comparison without a panel fails here, not in a
    run."""
    from attnlimits_workflow.assemble.compare_figure import INTERVAL_OF

    assert set(registry.COMPARED) <= set(INTERVAL_OF)


def test_values_at_each_length_by_hand():
    section = {
        "lengths": [32, 64],
        "distance": {"n_fixed": 5, "n_grid": [1, 5, 10], "length_fixed": 64},
        "separability": {"length": 64, "n_grid": [8, 2]},
        "gradient": {"length": 32, "temperatures": [1.0, 0.1]},
    }
    values = {
        name: [f(section, L) for L in (32, 64, 128)] for name, f in engine.ROW_ANALYSES.items()
    }
    assert values == {
        "distance": [[5], [1, 5, 10], []],
        "critical_n": [["list"], ["list"], []],
        "separability": [[], [2, 8], []],
        "gradient": [[0.1, 1.0], [], []],
    }


def test_planning_imports_the_registry_without_numpy_polars_or_torch():
    code = (
        "import sys; import attnlimits_workflow.registry; "
        "print(sorted(m for m in ('numpy', 'polars', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_the_rule_files_keep_no_list_of_analyses():
    """The lists the rules once kept by hand are the registry's: defined once, in src."""
    rules = "\n".join(p.read_text() for p in sorted((REPO / "workflow/rules").glob("*.smk")))
    for name in (
        "COMPARE_CLAIMS",
        "READING_KEYS_READ =",
        "BOUND_CHECKS =",
        "ANALYSES = [",
        "register_analysis(",
    ):
        assert name not in rules, name


DERIVED = (
    "CLAIM_SUMMARIES",
    "READING_KEYS_READ",
    "ROW_ANALYSES",
    "BOUND_CHECKS",
    "COMPARED",
    "SCORED",
    "PER_LENGTH",
    "GENERIC_SUMMARIES",
)


def test_each_derived_list_is_defined_once_in_src():
    """grep finds each of the registry's derived lists assigned in registry.py alone."""
    import re

    defined = {name: [] for name in DERIVED}
    for path in sorted((REPO / "src").rglob("*.py")):
        for name in DERIVED:
            if re.search(rf"^\s*{name}\s*(:[^=]*)?=", path.read_text(), re.M):
                defined[name].append(path.name)
    assert defined == {name: ["registry.py"] for name in DERIVED}
