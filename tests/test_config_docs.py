"""A config key is defined twice, its default in config/config.yaml and its type and description in
the schema, and config/README.md's key tables are written from them (attnlimits_workflow.config_docs):
the three stay in sync, and each way of drifting apart is caught. The lists of the attention rules
(config/README.md's study row, docs/normalizers.md's table) are written from the rules' records."""

import copy
import dataclasses

import pytest
import yaml
from project import REPO

from attnlimits import rules
from attnlimits_workflow import config_docs as docs
from attnlimits_workflow.config_schema import with_schema_defaults

pytestmark = pytest.mark.unit

SCHEMA = yaml.safe_load((REPO / docs.SCHEMA).read_text())
DEFAULTS = yaml.safe_load((REPO / docs.DEFAULTS).read_text())
README = (REPO / docs.README).read_text()
# the defaults as the docs are written from them: the schema's own defaults filled in
FILLED = with_schema_defaults(SCHEMA, DEFAULTS)


def schema_node(schema, dotted):
    node = schema
    for part in dotted.split("."):
        node = node["properties"][part]
    return node


def test_the_defaults_the_schema_and_the_readme_agree():
    assert docs.problems(SCHEMA, DEFAULTS, README) == []


def test_the_tables_are_written_byte_for_byte_the_same():
    assert docs.render(README, SCHEMA, FILLED) == README
    assert docs.render(docs.render(README, SCHEMA, FILLED), SCHEMA, FILLED) == README


def test_every_default_has_one_row_and_every_row_a_default():
    """Hand-picked rows as a reader finds them, and the count of rows against the defaults'
    leaves (a mapping of names or of free sections is one row)."""
    rows = [line for line in README.splitlines() if line.startswith("| `")]
    for row in (
        "| `seed` | `2025` | seed of every random choice:",
        "| `vectors` | `[q, k, v]` | which per-head vectors",
        "| `path` | `null` | a local text file;",
        "| `config_overrides` | `{}` | with `random_init` only:",
        "| `all_rows.mc_rows` | `256` | query rows per (layer, head, chunk)",
        "| `architecture.rope_theta` | `10000.0` | RoPE's base frequency |",
        "| `normalizers` | `softmax`, `softmax_T0.1`, `softmax_T10`, `sparsemax`, `entmax15`, "
        "`ssmax`, `sa_softmax` (config/config.yaml) |",
    ):
        assert any(line.startswith(row) for line in rows), row

    def leaves(value, path=()):
        if isinstance(value, dict) and value and path not in free:
            return [leaf for k, v in value.items() for leaf in leaves(v, (*path, k))]
        return [path]

    free = {
        ("models",),
        ("beyond", "normalizers"),
        ("study", "normalizers"),
        ("study", "diagnostics"),
    }
    tables = [m["body"] for m in docs.TABLE.finditer(README)]
    key_rows = [line for body in tables for line in body.splitlines()[2:]]
    assert len(tables) == 13 and len(key_rows) == len(leaves(FILLED))


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (None, "`null`"),
        ({}, "`{}`"),
        (["q", "k", "v"], "`[q, k, v]`"),
        (1.0, "`1.0`"),
        (0.00316, "`0.00316`"),
        ("utf-8", "`utf-8`"),
        ({"kind": "softmax", "temperature": 0.1}, "`{kind: softmax, temperature: 0.1}`"),
        (
            {f"n{i}": {"kind": "softmax"} for i in range(6)},
            "`n0`, `n1`, `n2`, `n3`, `n4`, `n5` (config/config.yaml)",
        ),
        (docs.MISSING, "not set"),
    ],
)
def test_a_default_is_shown_as_config_yaml_writes_it(value, cell):
    assert docs.default_cell(value) == cell


def drift(schema=None, defaults=None, readme=None):
    return docs.problems(
        SCHEMA if schema is None else schema,
        DEFAULTS if defaults is None else defaults,
        README if readme is None else readme,
    )


def test_a_key_without_a_description_is_caught():
    schema = copy.deepcopy(SCHEMA)
    del schema_node(schema, "analysis.distance.mc_strata")["description"]
    assert drift(schema=schema) == [
        f"{docs.SCHEMA}: analysis.distance.mc_strata has no description"
    ]


def test_a_default_changed_in_config_yaml_only_is_caught():
    defaults = copy.deepcopy(DEFAULTS)
    defaults["chunking"]["n_chunks"] = 8
    assert drift(defaults=defaults) == [
        f"{docs.README}: a key table differs from the schema and the defaults; "
        "run python -m attnlimits_workflow.config_docs --write"
    ]
    assert "| `n_chunks` | `8` |" in docs.render(README, SCHEMA, defaults)


def test_a_description_changed_in_the_readme_only_is_caught():
    readme = README.replace(
        "| `n_chunks` | `16` | consecutive chunks", "| `n_chunks` | `16` | chunks"
    )
    assert readme != README and len(drift(readme=readme)) == 1


def test_a_key_in_one_file_only_is_caught():
    defaults = copy.deepcopy(DEFAULTS)
    defaults["analysis"]["distance"]["mc_rounds"] = 3
    defaults["colour"] = "red"
    assert drift(defaults=defaults) == [
        f"{docs.DEFAULTS}: analysis.distance.mc_rounds is not in the schema",
        f"{docs.DEFAULTS}: colour is not in the schema",
    ]
    schema = copy.deepcopy(SCHEMA)
    section = schema_node(schema, "analysis.distance")
    section["properties"]["mc_rounds"] = {"type": "integer", "description": "rounds"}
    section["required"].append("mc_rounds")
    assert drift(schema=schema) == [
        f"{docs.DEFAULTS}: analysis.distance.mc_rounds is required by the schema but has no default"
    ]
    # an optional key may go without a default: its row says so
    section["required"].remove("mc_rounds")
    assert "| `mc_rounds` | not set | rounds |" in docs.render(README, schema, DEFAULTS)


def test_a_key_defined_in_the_schema_alone_gets_its_default_and_its_row():
    """An analysis's own setting may be defined once, in the schema (its ``default:``): the
    config gets it, its row shows it, and giving it in config/config.yaml too is refused."""
    schema = copy.deepcopy(SCHEMA)
    analysis = schema_node(schema, "analysis")
    analysis["properties"]["toy"] = {
        "type": "object",
        "description": "a toy analysis",
        "properties": {"floor": {"type": "number", "default": 0.5, "description": "its floor"}},
    }
    filled = with_schema_defaults(schema, DEFAULTS)
    assert filled["analysis"]["toy"] == {"floor": 0.5}
    # the file's values stay; nothing but the schema's defaults is added; the input is not
    # changed
    assert {k: v for k, v in filled["analysis"].items() if k != "toy"} == FILLED["analysis"]
    assert "toy" not in DEFAULTS["analysis"]
    mine = copy.deepcopy(DEFAULTS)
    mine["analysis"]["toy"] = {"floor": 2.0}
    assert with_schema_defaults(schema, mine)["analysis"]["toy"] == {"floor": 2.0}
    assert "| `toy.floor` | `0.5` | its floor |" in docs.render(README, schema, filled)
    assert drift(schema=schema, defaults=mine) == [
        f"{docs.DEFAULTS}: analysis.toy.floor has a default here and in {docs.SCHEMA}: keep one "
        "(the schema's for a key added since the paper's setup)",
    ]


def test_an_object_without_defaults_is_not_created():
    schema = {
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "number"}}},
            "c": {"type": "object", "properties": {"d": {"$ref": "#/definitions/d"}}},
        },
        "definitions": {"d": {"type": "number", "default": 1}},
    }
    assert with_schema_defaults(schema, {}) == {"c": {"d": 1}}
    assert with_schema_defaults(schema, {"c": {"d": 3}}) == {"c": {"d": 3}}


def test_a_default_of_the_wrong_type_is_caught():
    defaults = copy.deepcopy(DEFAULTS)
    defaults["extraction"]["threads"] = 4.0  # JSON Schema's integer, not the workflow's
    defaults["analysis"]["lengths"] = [32, 32]
    found = drift(defaults=defaults)
    assert found[0].startswith(f"{docs.DEFAULTS}: extraction.threads: the default does not fit")
    assert found[1].startswith(f"{docs.DEFAULTS}: analysis.lengths: the default does not fit")
    assert len(found) == 2


def test_a_table_of_no_section_and_a_missing_top_table_are_caught():
    readme = README.replace("<!-- keys: figures -->", "<!-- keys: figures.style -->")
    assert drift(readme=readme) == [
        f"{docs.README}: <!-- keys: figures.style --> is not a section of the schema"
    ]
    readme = README.replace("<!-- keys: top -->", "<!-- keys: nothing -->")
    assert f"{docs.README}: no <!-- keys: top --> table" in drift(readme=readme)


def test_the_command_line_checks_and_writes(tmp_path, capsys):
    """python -m attnlimits_workflow.config_docs (main) on a copy of the three files."""
    for path in (docs.SCHEMA, docs.DEFAULTS, docs.RULES_PAGE, *docs.FAMILY_PAGES):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((REPO / path).read_text())
    root = ["--root", str(tmp_path)]
    assert docs.main(["--check", *root]) == 0
    config = tmp_path / docs.DEFAULTS
    config.write_text(config.read_text().replace("n_chunks: 16", "n_chunks: 12"))
    capsys.readouterr()
    assert docs.main(["--check", *root]) == 1
    assert "config_docs --write" in capsys.readouterr().err
    assert docs.main(["--write", *root]) == 0
    assert "| `n_chunks` | `12` |" in (tmp_path / docs.README).read_text()
    assert docs.main(["--check", *root]) == 0
    page = tmp_path / docs.RULES_PAGE
    page.write_text(page.read_text().replace("| `softpick` |", "| `softpick` (`beta` 1) |"))
    assert docs.main(["--check", *root]) == 1
    assert docs.main(["--write", *root]) == 0
    assert page.read_text() == (REPO / docs.RULES_PAGE).read_text()
    with pytest.raises(SystemExit):
        docs.main([*root])  # --check or --write


# --------------------------------------------------------------------- the lists of the families
@pytest.mark.parametrize("page", docs.FAMILY_PAGES)
def test_the_family_lists_are_the_tables(page, monkeypatch):
    from attnlimits import families

    text = (REPO / page).read_text()
    assert docs.families_problems(page, text) == []
    # a family added to the table only is caught, and --write names it in its list
    table = {**families.FAMILIES, "helium": families.Family(causal=True)}
    monkeypatch.setattr(families, "FAMILIES", table)
    assert docs.families_problems(page, text) == [
        f"{page}: a list of model families differs from attnlimits.families; "
        "run python -m attnlimits_workflow.config_docs --write"
    ]
    assert "`llama4_text`, `helium`<!-- /families -->" in docs.render_families(text)
    # a page that lost its list markers is caught
    assert docs.families_problems(page, text.replace("<!-- families: causal -->", "")) == [
        f"{page}: no <!-- families: causal --> ... <!-- /families --> list"
    ]


# ------------------------------------------------------------------------ the lists of the rules
RULES_PAGE = (REPO / docs.RULES_PAGE).read_text()


def test_the_rule_lists_name_every_rule_in_the_tables_order():
    study_row = next(line for line in README.splitlines() if "the model is `study-<name>`" in line)
    listing = study_row[study_row.index("`kind` is a rule of") :]  # not the default's names
    table = docs.RULE_TABLE.search(RULES_PAGE)["body"].splitlines()[2:]
    assert [row.split("`")[1] for row in table] == list(rules.RULES)
    kinds = [kind for kind in rules.RULES if f"`{kind}`" in listing]
    assert kinds == list(rules.RULES)
    assert sorted(kinds, key=lambda kind: listing.index(f"`{kind}`")) == kinds
    assert docs.RULE_LIST not in README and docs.rules_problems(RULES_PAGE) == []


def test_rule_texts_by_hand():
    softmax, ssmax = rules.get("softmax"), rules.get("scalable_softmax")
    assert docs.settings_text(softmax) == " (`temperature` 1)"
    assert docs.settings_text(ssmax) == " (`s` 0.43, learned per head when trained)"
    assert (
        docs.settings_text(rules.get("log_length_softmax")) == " (`floor_scale` 8192, `beta` 0.1)"
    )
    assert docs.settings_text(rules.get("softpick")) == ""
    # kinds in a row with one summary share it; a rule without one is its kind alone
    table = {
        "a": dataclasses.replace(softmax, name="a"),
        "b": dataclasses.replace(softmax, name="b"),
        "c": dataclasses.replace(ssmax, name="c", summary=""),
    }
    assert docs.rule_list(table) == "`a`, `b` (setting `temperature`, default 1), `c`"
    row = docs.rule_table(table).splitlines()[3]
    assert row.startswith("| `b` (`temperature` 1) | softmax(l / T) | lambda_max(")


def test_a_rule_changed_in_its_record_only_or_without_its_texts_is_caught():
    table = dict(rules.RULES)
    table["softpick"] = dataclasses.replace(table["softpick"], formula="relu(e^l - 1) / D")
    assert docs.rules_problems(RULES_PAGE, table) == [
        f"{docs.RULES_PAGE}: the rules' table differs from attnlimits.rules.RULES; "
        "run python -m attnlimits_workflow.config_docs --write"
    ]
    assert "| relu(e^l - 1) / D |" in docs.render_rules_page(RULES_PAGE, table)
    table["softpick"] = dataclasses.replace(table["softpick"], summary=" ", jacobian_text="")
    assert docs.rules_problems(RULES_PAGE, table) == [
        "attnlimits.rules: softpick has no jacobian_text (its Rule record)",
        "attnlimits.rules: softpick has no summary (its Rule record)",
    ]
    no_table = RULES_PAGE.replace("<!-- rules: table -->", "")
    assert docs.rules_problems(no_table) == [
        f"{docs.RULES_PAGE}: no <!-- rules: table --> ... <!-- /rules --> table"
    ]


def keys_named_in(source: str) -> set[str]:
    """Dotted config keys (``analysis.distance.n_fixed``) in a module's strings: its messages."""
    import ast
    import re

    sections = "|".join(SCHEMA["properties"])
    key = re.compile(rf"(?<![\w.<-])(?:{sections})(?:\.[A-Za-z_]\w*)+")
    strings = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    return {match.group(0) for text in strings for match in key.finditer(text)}


def is_schema_key(schema, dotted: str) -> bool:
    """A key of the schema, or a path below a mapping of names or free settings."""
    node = schema
    for i, part in enumerate(dotted.split(".")):
        node = docs.resolve(schema, node)
        if part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            return i > 0 and (bool(node.get("additionalProperties")) or not node.get("properties"))
    return True


@pytest.mark.parametrize("module", ["config.py", "models.py"])
def test_every_key_the_checks_name_is_a_key_of_the_schema(module):
    """A renamed key whose cross-key check still names the old one in its message."""
    source = (REPO / "src/attnlimits_workflow" / module).read_text()
    named = keys_named_in(source)
    assert named, module
    assert sorted(k for k in named if not is_schema_key(SCHEMA, k)) == []


def test_a_key_a_check_names_after_its_rename_is_caught():
    message = 'errs.append(f"analysis.distance.n_fix: N={n} must be < every L")'
    assert keys_named_in(message) == {"analysis.distance.n_fix"}
    assert not is_schema_key(SCHEMA, "analysis.distance.n_fix")
    assert is_schema_key(SCHEMA, "beyond.normalizers.ssmax.s")  # below a mapping of names
    assert keys_named_in('model.get("path"); "attnlimits.normalizers"') == set()  # code, modules
