import math
import sys
from pathlib import Path

import yaml
from attnlimits_workflow.config import (
    ConfigError,
    coerce_command_line_values,
    deep_merge,
    temperature_name,
    validate as validate_config,
)
from snakemake.utils import min_version, validate

min_version("9.0")

# The user's --configfile and --config overlay the defaults, so a user's file holds only what it
# changes. The overlay is taken as the user wrote it (Snakemake's own merge would keep default
# entries of mappings the user replaces, such as beyond.normalizers: see deep_merge), and values
# from --config get the schema's types.
_schema = yaml.safe_load(
    Path(workflow.source_path("../schemas/config.schema.yaml")).read_text()
)
_defaults = yaml.safe_load(
    (Path(workflow.basedir) / "config" / "config.yaml").read_text()
)
_user = getattr(workflow.config_settings, "overwrite_config", None) or config
_merged = coerce_command_line_values(deep_merge(_defaults, _user), _schema)
config.clear()
config.update(_merged)

# The JSON schema (types, ranges, unknown keys) is applied by snakemake.utils.validate; our own
# pass turns its verdict into one line per problem naming the key, then checks cross-key rules
# (N < L, L within the model's positions, files that must exist). Any problem stops the run here,
# before a single job starts, without a traceback.
try:
    validate_config(config, workflow.source_path("../schemas/config.schema.yaml"))
    validate(config, "../schemas/config.schema.yaml")
except (ConfigError, WorkflowError) as exc:
    sys.stderr.write(f"Invalid configuration:\n{exc}\n")
    sys.exit(1)


ANALYSIS = config["analysis"]
MODEL = config["model"]["name"]
CORPUS = config["corpus"]["name"]
N_BATCHES = math.ceil(
    config["chunking"]["n_chunks"] / config["extraction"]["chunks_per_batch"]
)


wildcard_constraints:
    batch=r"\d{3}",
    length=r"\d+",
    n=r"\d+",
    temperature=r"[0-9.eE+-]+",


def results(*parts):
    """Every results path is built here, so the layout lives in one place."""
    return str(Path("results", *map(str, parts)))


def fmt_temperature(t):
    return temperature_name(t)


def dump_dirs(wildcards=None):
    return [results("dumps", f"batch{b:03d}") for b in range(N_BATCHES)]


def model_dir(wildcards=None):
    return f"resources/models/{MODEL}"


def distance_targets():
    d = ANALYSIS["distance"]
    pairs = {(L, d["n_fixed"]) for L in ANALYSIS["lengths"]}
    pairs |= {(d["length_fixed"], n) for n in d["n_grid"]}
    return [
        results("analysis", "distance", f"L{L}_N{n}.parquet") for L, n in sorted(pairs)
    ]


def separability_targets():
    s = ANALYSIS["separability"]
    return [
        results("analysis", "separability", f"L{s['length']}_N{n}.parquet")
        for n in sorted(s["n_grid"])
    ]


def gradient_targets():
    return [
        results("analysis", "gradient", f"T{fmt_temperature(t)}.parquet")
        for t in ANALYSIS["gradient"]["temperatures"]
    ]


def per_length_targets(kind):
    return [
        results("analysis", kind, f"L{L}.parquet") for L in sorted(ANALYSIS["lengths"])
    ]


BEYOND = config["beyond"]


def normalizer_outputs(kind):
    return [
        results("beyond", "normalizers", name, f"{kind}.parquet")
        for name in BEYOND["normalizers"]
    ]


FIGURES = ["fig1", "fig2", "fig3", "fig4", "fig5", "coverage", "heads"]
TABLES = ["table1", "table2"]


def final_outputs():
    figs = [f"figures/{f}.{ext}" for f in FIGURES for ext in ("pdf", "png")]
    tabs = [f"tables/{t}.{ext}" for t in TABLES for ext in ("csv", "md", "tex")]
    extra = ["tables/coverage.csv", "tables/coverage.md", "tables/heads.csv"]
    return figs + tabs + extra + [results("summary", "config.yaml")]
