"""README's rule diagram is Snakemake's own rule graph (attnlimits_workflow.rule_diagram): a rule
added, renamed or rewired without rewriting it fails here."""

import pytest
from project import REPO

from attnlimits_workflow import rule_diagram


@pytest.mark.unit
def test_edges_are_named_by_rule_sorted_and_without_the_aggregate():
    mermaid = """---
title: DAG
---
flowchart TB
\tid0[all]
\tid1[extract_batch]
\tid2[chunk_corpus]
\tid3[pack_samples]
\tstyle id0 fill:#D95757,stroke-width:2px,color:#333333
\tid1 --> id3
\tid2 --> id1
\tid3 --> id0
\tid2 --> id1
"""
    edges = rule_diagram.rule_edges(mermaid)
    assert edges == [("chunk_corpus", "extract_batch"), ("extract_batch", "pack_samples")]
    assert rule_diagram.diagram(edges).splitlines()[:3] == [
        "```mermaid",
        "flowchart LR",
        "  chunk_corpus --> extract_batch",
    ]


@pytest.mark.integration
def test_the_readme_diagram_is_the_rule_graph():
    want = rule_diagram.expected_readme(REPO)
    assert want == (REPO / "README.md").read_text(), (
        "README.md's rule diagram drifted: run python -m attnlimits_workflow.rule_diagram --write"
    )
