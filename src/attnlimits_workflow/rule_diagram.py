"""README.md's "How it works" diagram, written from Snakemake's own rule graph, so that it
cannot drift from the rules.

    python -m attnlimits_workflow.rule_diagram --check   # exit 1 if the diagram drifted
    python -m attnlimits_workflow.rule_diagram --write   # rewrite it

The graph is the rules of ``snakemake all study --rulegraph mermaid-js`` on the `.test`
configuration (one model, the study): every rule a run reaches, each edge "this rule's outputs
feed that one". Snakemake's own output numbers the rules and lists the edges in an order that
varies between calls; here each node is named by its rule and the edges are sorted, so the
diagram changes only when the rules do. The diagram stands between ``<!-- rulegraph -->`` and
``<!-- /rulegraph -->``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from .runner import snakemake_command

README = Path("README.md")
TEST_DIR = Path(".test")
TEST_CONFIG = Path(".test/config/config.yaml")
TARGETS = ("all", "study")
BLOCK = re.compile(r"(<!-- rulegraph -->\n)(?P<body>.*?)(<!-- /rulegraph -->)", re.S)
_NODE = re.compile(r"^\s*(id\d+)\[(\w+)\]\s*$")
_EDGE = re.compile(r"^\s*(id\d+) --> (id\d+)\s*$")
# rules whose edges say nothing a reader needs: the aggregate target
LEFT_OUT = {"all"}


def rule_edges(mermaid: str) -> list[tuple[str, str]]:
    """(upstream rule, downstream rule) pairs of Snakemake's mermaid rule graph, sorted."""
    names: dict[str, str] = {}
    edges = []
    for line in mermaid.splitlines():
        if node := _NODE.match(line):
            names[node.group(1)] = node.group(2)
        elif edge := _EDGE.match(line):
            edges.append((edge.group(1), edge.group(2)))
    pairs = {(names[a], names[b]) for a, b in edges}
    return sorted((a, b) for a, b in pairs if a not in LEFT_OUT and b not in LEFT_OUT)


def diagram(edges: list[tuple[str, str]]) -> str:
    """A mermaid flowchart of ``edges``, one line per edge, in a fenced block."""
    lines = ["```mermaid", "flowchart LR"]
    lines += [f"  {a} --> {b}" for a, b in edges]
    return "\n".join(lines + ["```"]) + "\n"


def rule_graph(repo: Path) -> str:
    """Snakemake's mermaid rule graph of TARGETS on the .test configuration (a dry planning)."""
    cmd = snakemake_command(
        repo / "Snakefile",
        repo / TEST_DIR,
        repo / TEST_CONFIG,
        *TARGETS,
        "--rulegraph",
        "mermaid-js",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake --rulegraph failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def expected_readme(repo: Path) -> str:
    text = (repo / README).read_text()
    if not BLOCK.search(text):
        raise RuntimeError(f"{README}: no <!-- rulegraph --> ... <!-- /rulegraph --> block")
    body = diagram(rule_edges(rule_graph(repo)))
    return BLOCK.sub(lambda m: m.group(1) + body + m.group(3), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    repo = Path.cwd()
    want = expected_readme(repo)
    if args.write:
        (repo / README).write_text(want)
        return 0
    if want != (repo / README).read_text():
        print(
            f"{README}: the rule diagram differs from the rule graph; run "
            "python -m attnlimits_workflow.rule_diagram --write",
            file=sys.stderr,
        )
        return 1
    print("rule diagram in sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
