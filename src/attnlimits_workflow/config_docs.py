"""config/README.md's key tables, written from the two files that define a key: its default in
config/config.yaml, its type and description in workflow/schemas/config.schema.yaml; and the
lists of attention rules, written from the rules' table (attnlimits.rules.RULES).

    python -m attnlimits_workflow.config_docs --check   # exit 1 if a key, a table or a list drifted
    python -m attnlimits_workflow.config_docs --write   # rewrite the tables and the lists

A key of the README is a schema property without properties of its own (``analysis.lengths``),
or one whose properties carry no description (``study.diagnostics``: its sections are one row).
A table stands between ``<!-- keys: SECTION -->`` and ``<!-- /keys -->`` and lists every key
under SECTION (``top``: the whole config) that no deeper table lists, in config/config.yaml's
order.

The rules: ``<!-- rules: list -->`` in a key's schema description becomes, in its README row,
every rule's kind with its ``Rule.summary``; docs/normalizers.md's table, between
``<!-- rules: table -->`` and ``<!-- /rules -->``, has one row per rule (its settings with their
defaults, ``Rule.formula``, ``Rule.jacobian_text``), both in the table's order.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from attnlimits.rules import RULES, Rule

from .config_schema import StrictValidator, with_schema_defaults
from .config_schema import resolve_ref as resolve

DEFAULTS = Path("config/config.yaml")
SCHEMA = Path("workflow/schemas/config.schema.yaml")
README = Path("config/README.md")
RULES_PAGE = Path("docs/normalizers.md")
# The pages whose lists of model families (attnlimits.families.FAMILIES) are written here:
# ``<!-- families: causal -->`` ... ``<!-- /families -->`` (or ``bidirectional``) holds the
# table's families of that kind, in its order.
FAMILY_PAGES = (Path("README.md"), README)
FAMILY_LIST = re.compile(
    r"(<!-- families: (?P<kind>causal|bidirectional) -->)(?P<body>.*?)(<!-- /families -->)", re.S
)
RULE_LIST = "<!-- rules: list -->"
RULE_TABLE = re.compile(r"(<!-- rules: table -->\n)(?P<body>.*?)(<!-- /rules -->)", re.S)
# The Rule fields the lists show, each of which every rule must have.
RULE_TEXTS = ("formula", "jacobian_text", "summary")
TOP = "top"
TABLE = re.compile(r"(<!-- keys: (?P<section>[\w.]+) -->\n)(?P<body>.*?)(<!-- /keys -->)", re.S)
MISSING = object()
# A default mapping longer than this is shown by its names, not written out.
LONGEST_DEFAULT = 100

KeyPath = tuple[str, ...]


def is_key(schema: dict[str, Any], node: dict[str, Any]) -> bool:
    """A node the README documents in one row (else a section of rows)."""
    props = node.get("properties") or {}
    return not any("description" in resolve(schema, sub) for sub in props.values())


def lookup(config: Any, path: KeyPath) -> Any:
    for part in path:
        if not isinstance(config, dict) or part not in config:
            return MISSING
        config = config[part]
    return config


def keys(
    schema: dict[str, Any],
    defaults: dict[str, Any],
    node: dict[str, Any] | None = None,
    path: KeyPath = (),
) -> Iterator[tuple[KeyPath, dict[str, Any]]]:
    """(path, schema node) of every key, in the defaults' order, then the schema's for keys
    without a default."""
    node = resolve(schema, schema if node is None else node)
    if path and is_key(schema, node):
        yield path, node
        return
    props = node.get("properties") or {}
    present = lookup(defaults, path)
    order = [k for k in present if k in props] if isinstance(present, dict) else []
    for name in order + [k for k in props if k not in order]:
        yield from keys(schema, defaults, props[name], (*path, name))


def flow(value: Any) -> str:
    """A value as one line of YAML, as config/config.yaml would hold it."""
    text = yaml.safe_dump(value, default_flow_style=True, width=sys.maxsize, sort_keys=False)
    return text.strip().removesuffix("\n...")


def default_cell(value: Any) -> str:
    if value is MISSING:
        return "not set"
    if isinstance(value, dict) and value and len(flow(value)) > LONGEST_DEFAULT:
        return ", ".join(f"`{name}`" for name in value) + " (config/config.yaml)"
    return f"`{flow(value)}`"


def cell(text: str) -> str:
    """Text in one table cell: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def table(rows: list[tuple[KeyPath, dict[str, Any]]], section: KeyPath, defaults: dict) -> str:
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for path, node in rows:
        key = ".".join(path[len(section) :])
        value = cell(default_cell(lookup(defaults, path)))
        description = str(node.get("description", "")).replace(RULE_LIST, rule_list())
        lines.append(f"| `{key}` | {value} | {cell(description)} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------ the lists of the rules
def rule_list(rules: dict[str, Rule] = RULES) -> str:
    """Every rule's kind with its summary, in the table's order; kinds in a row with the same
    summary share it: `softmax`, `sparsemax` (setting `temperature`, ...), `softpick` (...)."""
    groups: list[tuple[list[str], str]] = []
    for rule in rules.values():
        if groups and groups[-1][1] == rule.summary:
            groups[-1][0].append(rule.name)
        else:
            groups.append(([rule.name], rule.summary))
    return ", ".join(
        ", ".join(f"`{kind}`" for kind in kinds) + (f" ({summary})" if summary else "")
        for kinds, summary in groups
    )


def settings_text(rule: Rule) -> str:
    """`` (`name` default, ...)``: the rule's what-if settings, each with its default, a learned
    one so marked; empty for a rule without settings."""

    def shown(value: Any) -> str:
        return f"{value:g}" if isinstance(value, int | float) else str(value)

    learned = {p.name for p in rule.learned}
    parts = [
        f"`{name}` {shown(value)}" + (", learned per head when trained" if name in learned else "")
        for name, value in rule.settings.items()
    ]
    return f" ({', '.join(parts)})" if parts else ""


def rule_table(rules: dict[str, Rule] = RULES) -> str:
    """docs/normalizers.md's table: one row per rule, its kind and settings, its weights and its
    Jacobian norm."""
    lines = ["| kind | weights | Jacobian norm (exact) |", "|---|---|---|"]
    for rule in rules.values():
        lines.append(
            f"| {cell(f'`{rule.name}`{settings_text(rule)}')} | {cell(rule.formula)} "
            f"| {cell(rule.jacobian_text)} |"
        )
    return "\n".join(lines) + "\n"


def render_rules_page(page: str, rules: dict[str, Rule] = RULES) -> str:
    """``page`` with every rules table written anew."""
    return RULE_TABLE.sub(lambda m: m.group(1) + rule_table(rules) + m.group(3), page)


def rules_problems(page: str, rules: dict[str, Rule] = RULES) -> list[str]:
    """A rule without a text the lists show, and a rules table that drifted, one line each."""
    out = [
        f"attnlimits.rules: {name} has no {field} (its Rule record)"
        for name, rule in rules.items()
        for field in RULE_TEXTS
        if not getattr(rule, field).strip()
    ]
    if not RULE_TABLE.search(page):
        out.append(f"{RULES_PAGE}: no <!-- rules: table --> ... <!-- /rules --> table")
    elif not out and render_rules_page(page, rules) != page:
        out.append(
            f"{RULES_PAGE}: the rules' table differs from attnlimits.rules.RULES; "
            "run python -m attnlimits_workflow.config_docs --write"
        )
    return out


def section_path(name: str) -> KeyPath:
    return () if name == TOP else tuple(name.split("."))


def render(readme: str, schema: dict[str, Any], defaults: dict[str, Any]) -> str:
    """``readme`` with every key table written anew."""
    sections = [section_path(m["section"]) for m in TABLE.finditer(readme)]
    rows: dict[KeyPath, list] = {s: [] for s in sections}
    for path, node in keys(schema, defaults):
        owners = [s for s in sections if path[: len(s)] == s]
        if owners:
            rows[max(owners, key=len)].append((path, node))

    def fill(match: re.Match) -> str:
        section = section_path(match["section"])
        return match.group(1) + table(rows[section], section, defaults) + match.group(4)

    return TABLE.sub(fill, readme)


def problems(schema: dict[str, Any], file_defaults: dict[str, Any], readme: str) -> list[str]:
    """How the defaults (``file_defaults``: config/config.yaml's, with the schema's own
    ``default:`` filled in where it holds none), the schema and the README's tables disagree, one
    line each."""
    defaults = with_schema_defaults(schema, file_defaults)
    out = []
    for path, node in keys(schema, defaults):
        key, value = ".".join(path), lookup(defaults, path)
        if not str(node.get("description", "")).strip():
            whose = " (nor have its keys)" if node.get("properties") else ""
            out.append(f"{SCHEMA}: {key} has no description{whose}")
        parent = resolve(schema, lookup_node(schema, path[:-1]))
        if "default" in node and lookup(file_defaults, path) is not MISSING:
            out.append(
                f"{DEFAULTS}: {key} has a default here and in {SCHEMA}: keep one (the schema's "
                "for a key added since the paper's setup)"
            )
        if value is MISSING and path[-1] in parent.get("required", []):
            out.append(f"{DEFAULTS}: {key} is required by the schema but has no default")
        elif value is not MISSING:
            check = StrictValidator({**node, "definitions": schema.get("definitions", {})})
            for err in check.iter_errors(value):
                out.append(
                    f"{DEFAULTS}: {key}: the default does not fit the schema ({err.message})"
                )
    out += [f"{DEFAULTS}: {key} is not in the schema" for key in unknown(schema, defaults)]
    sections = {m["section"] for m in TABLE.finditer(readme)}
    if TOP not in sections:
        out.append(f"{README}: no <!-- keys: {TOP} --> table")
    for name in sorted(sections - {TOP}):
        node = lookup_node(schema, section_path(name))
        if node is None or is_key(schema, node):
            out.append(f"{README}: <!-- keys: {name} --> is not a section of the schema")
    if not out and render(readme, schema, defaults) != readme:
        out.append(
            f"{README}: a key table differs from the schema and the defaults; "
            "run python -m attnlimits_workflow.config_docs --write"
        )
    return out


def lookup_node(schema: dict[str, Any], path: KeyPath) -> dict[str, Any] | None:
    node = schema
    for part in path:
        node = resolve(schema, node).get("properties", {}).get(part)
        if node is None:
            return None
    return resolve(schema, node)


def unknown(schema: dict[str, Any], defaults: Any, path: KeyPath = ()) -> Iterator[str]:
    """Keys of the defaults that the schema does not name (none below a key: its value)."""
    node = lookup_node(schema, path)
    if node is None:
        yield ".".join(path)
    elif isinstance(defaults, dict) and not (path and is_key(schema, node)):
        for name, value in defaults.items():
            yield from unknown(schema, value, (*path, name))


def render_families(page: str) -> str:
    """``page`` with each family list written anew from the table."""
    from attnlimits.families import FAMILIES

    def fill(match: re.Match) -> str:
        causal = match["kind"] == "causal"
        names = [f"`{name}`" for name, f in FAMILIES.items() if f.causal == causal]
        return match.group(1) + ", ".join(names) + match.group(4)

    return FAMILY_LIST.sub(fill, page)


def families_problems(path: Path, page: str) -> list[str]:
    """A family page without its lists, or whose lists differ from the table."""
    kinds = {m["kind"] for m in FAMILY_LIST.finditer(page)}
    out = [
        f"{path}: no <!-- families: {kind} --> ... <!-- /families --> list"
        for kind in ("causal", "bidirectional")
        if kind not in kinds
    ]
    if not out and render_families(page) != page:
        out.append(
            f"{path}: a list of model families differs from attnlimits.families; "
            "run python -m attnlimits_workflow.config_docs --write"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if anything drifted")
    mode.add_argument(
        "--write",
        action="store_true",
        help=f"rewrite {README}'s tables, {RULES_PAGE}'s rules table and the family lists",
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository")
    args = parser.parse_args(argv)
    schema = yaml.safe_load((args.root / SCHEMA).read_text())
    defaults = yaml.safe_load((args.root / DEFAULTS).read_text())
    readme = (args.root / README).read_text()
    page = (args.root / RULES_PAGE).read_text()
    if args.write:
        (args.root / README).write_text(
            render(readme, schema, with_schema_defaults(schema, defaults))
        )
        (args.root / RULES_PAGE).write_text(render_rules_page(page))
        readme = (args.root / README).read_text()
        page = (args.root / RULES_PAGE).read_text()
    for path in FAMILY_PAGES:
        if args.write:
            text = (args.root / path).read_text()
            (args.root / path).write_text(render_families(text))
    readme = (args.root / README).read_text()
    found = problems(schema, defaults, readme) + rules_problems(page)
    for path in FAMILY_PAGES:
        found += families_problems(path, (args.root / path).read_text())
    done = "config keys and rule lists in sync"
    print("\n".join(found) or done, file=sys.stderr if found else sys.stdout)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
