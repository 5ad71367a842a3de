import functools
import os
import math
import re
import sys
from pathlib import Path

import yaml
from attnlimits_workflow.config import (
    ConfigError,
    command_line_hint,
    load_config,
    reading_changes,
    reading_run_name,
    reading_runs,
    temperature_name,
)
from attnlimits_workflow.engine import kernel_plan
from attnlimits_workflow.engine import plan as plan_rows
from attnlimits_workflow.jobs import chunks_cut
from attnlimits_workflow.integrity import refresh_changed_folders
from attnlimits_workflow.integrity import unverifiable_folders
from attnlimits_workflow.registry import BOUND_CHECKS
from attnlimits_workflow.registry import COMPARED
from attnlimits_workflow.registry import FIGURES as ANALYSIS_FIGURES
from attnlimits_workflow.registry import GENERIC_SUMMARIES
from attnlimits_workflow.registry import PER_LENGTH
from attnlimits_workflow.registry import READING_KEYS_READ
from attnlimits_workflow.registry import ROW_ANALYSES
from attnlimits_workflow.registry import SCORED
from attnlimits_workflow.registry import caption as figure_caption
from snakemake.utils import min_version

min_version("9.0")

# The user's --configfile and --config overlay the defaults, so a user's file holds only what it
# changes. The overlay is taken as the user wrote it (Snakemake's own merge would keep default
# entries of mappings the user replaces, such as beyond.normalizers: see deep_merge), and values
# from --config get the schema's types.
_defaults = yaml.safe_load(
    (Path(workflow.basedir) / "config" / "config.yaml").read_text()
)
_user = getattr(workflow.config_settings, "overwrite_config", None) or config

# One validation pass (attnlimits_workflow.config.load_config): the JSON schema, one line per
# problem naming the key, then the cross-key rules a schema cannot say (N < L, L within the model's
# positions, files that must exist), for every configured model. Any problem stops the run here,
# before a single job starts, without a traceback.
try:
    _merged, MODELS, DEFAULT_MODEL = load_config(
        _defaults,
        _user,
        workflow.source_path("../schemas/config.schema.yaml"),
        workflow.basedir,
    )
except ConfigError as exc:
    sys.stderr.write(f"Invalid configuration:\n{exc}\n{command_line_hint(str(exc))}\n")
    sys.exit(1)
config.clear()
config.update(_merged)

CORPUS = config["corpus"]["name"]
# Every text of the run by corpus.name: the shared corpus section (the study's) and each models
# entry's own (config/findings.yaml runs every model on two texts); the config check has made
# sure one name means one section.
CORPORA = {
    config["corpus"]["name"]: config["corpus"],
    **{c["corpus"]["name"]: c["corpus"] for c in MODELS.values()},
}
# The configured models (`all`, the comparison, the findings), and the study's trained models
# (study-<normalizer>, `study`), which go through the same rules from extraction on.
PAPER_MODELS = [m for m, c in MODELS.items() if not c["model"].get("trained")]
STUDY_MODELS = [m for m, c in MODELS.items() if c["model"].get("trained")]
# the study's models left at their initial weights (study.untrained_seeds), and the trained ones
UNTRAINED_MODELS = [m for m in STUDY_MODELS if MODELS[m]["model"].get("untrained")]
TRAINED_MODELS = [m for m in STUDY_MODELS if m not in UNTRAINED_MODELS]
# The paper's open readings (analysis.readings): each a derived run <model>~<reading>, with its
# own analyses and Table 1 but its source model's chunks, dumps and packs (source_run).
_readings = reading_runs(MODELS)
READING_RUNS = {
    name: (source, reading) for name, (source, reading, _) in _readings.items()
}
MODELS.update({name: cfg for name, (_, _, cfg) in _readings.items()})
# The configured models scored under readings: their robustness tables feed the findings page.
READ_MODELS = [m for m in PAPER_MODELS if MODELS[m]["analysis"]["readings"]]
# The entries whose N* the run measures (effective_set.enabled): docs/findings.md reads them.
N_STAR_MODELS = [m for m in PAPER_MODELS if MODELS[m]["effective_set"]["enabled"]]

# A file rewritten inside a dump batch or a sample pack (directory outputs) moves neither's
# time, so Snakemake would see nothing to do: such a folder is made newer than its readers here,
# and they rerun and verify its checksums (attnlimits_workflow.integrity). One stat per file.
_written = [
    p
    for p in (
        *Path("results").glob("*/dumps/batch*"),
        *Path("results").glob("*/samples/L*"),
    )
    if p.is_dir()
]
for _folder in refresh_changed_folders(_written):
    sys.stderr.write(
        f"{_folder}: a file in it changed after its job wrote it; the jobs that read it rerun "
        "and verify its checksums\n"
    )
_unverifiable = unverifiable_folders(_written)
if _unverifiable:
    sys.stderr.write(
        f"{len(_unverifiable)} dump batches or sample packs were written before checksums "
        f"(e.g. {_unverifiable[0]}): they are read unverified; delete them and rerun to "
        "rebuild them with checksums\n"
    )


def name_pattern(names):
    """A wildcard constraint matching exactly ``names`` (nothing when there are none)."""
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


wildcard_constraints:
    model=name_pattern(MODELS),
    corpus=name_pattern(CORPORA),
    batch=r"\d{3}",
    length=r"\d+",
    n=r"\d+",
    temperature=r"[0-9.eE+-]+",


def results(*parts):
    """Every results path is built here, so the layout lives in one place: results/<model>/..."""
    return str(Path("results", *map(str, parts)))


def corpus_file(name):
    """Where the download rule leaves the text named ``name``."""
    return f"resources/corpus/{name}.txt"


def model_corpus(wildcards):
    """An input function: the text the job's own model reads."""
    return corpus_file(MODELS[wildcards.model]["corpus"]["name"])


def model_setting(*keys):
    """An input or params function: one setting of the job's own model (wildcards.model)."""

    def lookup(wildcards):
        node = MODELS[wildcards.model]
        for key in keys:
            node = node[key]
        return node

    return lookup


def analysis_of(wildcards):
    return MODELS[wildcards.model]["analysis"]


# The analyses whose rows the row-block kernels compute (attnlimits.protocol) on
# analysis.all_rows.device are the row engine's (attnlimits_workflow.engine.ROW_ANALYSES):
# under the paper's protocol (analysis.protocol all_rows) one job per L, rule rows, computes
# their tables in one pass over each head's rows, and the tables' rules take them from its
# folder. Under last_row each table is its own job.
ROW_ENGINE_MODELS = [
    m for m, c in MODELS.items() if c["analysis"]["protocol"] == "all_rows"
]
LAST_ROW_MODELS = [m for m in MODELS if m not in ROW_ENGINE_MODELS]


def engine_plan(wildcards):
    """Params function of the rows rule: what the row engine computes at the job's L (the
    analyses with values there, each with its settings): attnlimits_workflow.engine.plan. A
    reading's run computes only the analyses whose summaries it does not take from its source
    (summary_run)."""
    own = [
        a for a in ROW_ANALYSES if summary_run(wildcards.model, a) == wildcards.model
    ]
    return plan_rows(analysis_of(wildcards), config["seed"], int(wildcards.length), own)


def engine_part_plan(wildcards):
    """Params function of the rows_part rule: engine_plan less the settings no pass reads."""
    return kernel_plan(engine_plan(wildcards))


def row_parts(wildcards):
    """Input function of the rows rule: its L's parts (analysis.all_rows.jobs_per_length)."""
    parts = analysis_of(wildcards)["all_rows"]["jobs_per_length"]
    return [
        results(wildcards.model, "row_parts", f"L{wildcards.length}", f"part{p}.npz")
        for p in range(parts)
    ]


def separation_at(wildcards):
    """Input function of the rows rules: Theorem 2's delta per sample where separability runs at the
    job's L over the whole context, else nothing."""
    planned = engine_plan(wildcards).get("separability")
    if not planned or planned["settings"]["delta_over"] != "context":
        return []
    return results(
        wildcards.model, "analysis", "separation", f"L{wildcards.length}.parquet"
    )


def rows_at(key):
    """Input function: the row engine's folder at the L of analysis.<key>.length."""

    def rows(wildcards):
        length = analysis_of(wildcards)[key]["length"]
        return results(wildcards.model, "rows", f"L{length}")

    return rows


def analysis_gpus(wildcards):
    """resources.gpu of an analysis job: 1 when its rows run on a GPU (the all_rows protocol
    with analysis.all_rows.device cuda[:i]), as extract_batch asks for one under
    extraction.device cuda; 0 otherwise, and for the generic rule's other analyses."""
    name = getattr(wildcards, "analysis", None)
    if name is not None and name not in ROW_ANALYSES:
        return 0
    analysis = analysis_of(wildcards)
    return int(
        analysis["protocol"] == "all_rows"
        and analysis["all_rows"]["device"].startswith("cuda")
    )


def row_chunks_of(wildcards):
    """How many chunks' q/k rows the pack holds: the all-rows protocol's, or none."""
    analysis = analysis_of(wildcards)
    return analysis["all_rows"]["chunks"] if analysis["protocol"] == "all_rows" else 0


def fmt_temperature(t):
    return temperature_name(t)


def n_batches(model):
    c = MODELS[model]
    n_chunks = c["chunking"]["n_chunks"]
    # auto: as many as the text holds, known once the chunk_corpus checkpoint has cut them
    if n_chunks == "auto":
        tokens = checkpoints.chunk_corpus.get(model=model).output.tokens
        n_chunks = recorded_chunks(tokens, os.stat(tokens).st_mtime_ns)
    return math.ceil(n_chunks / c["extraction"]["chunks_per_batch"])


@functools.lru_cache
def recorded_chunks(tokens, mtime_ns):
    """chunks_cut, read once per version of the file while planning."""
    return chunks_cut(tokens)


def chunking_params(wildcards):
    """chunk_corpus's settings: the chunking section; with n_chunks: auto, also the fewest chunks
    it may take (the all-rows protocol's, else one). A number reads neither max_chunks nor the
    protocol, so changing them leaves the chunks, and every extraction after them, as they are.
    """
    chunking = dict(MODELS[wildcards.model]["chunking"])
    if chunking["n_chunks"] == "auto":
        chunking["least_chunks"] = max(1, row_chunks_of(wildcards))
    else:
        chunking.pop("max_chunks", None)
    return chunking


def source_run(model):
    """The run whose chunks, dumps and packs ``model`` reads: a reading's source, else itself."""
    return READING_RUNS[model][0] if model in READING_RUNS else model


def dump_dirs(wildcards):
    source = source_run(wildcards.model)
    return [results(source, "dumps", f"batch{b:03d}") for b in range(n_batches(source))]


def model_dir(model="{model}"):
    return f"resources/models/{model}"


def source_model_dir(wildcards):
    return model_dir(source_run(wildcards.model))


def source_tokens(wildcards):
    return results(source_run(wildcards.model), "chunks", "tokens.parquet")


def embeddings_of(model):
    """The embeddings a model's dumps and packs serve: its own and its readings'."""
    a = MODELS[model]["analysis"]
    return {a["embedding"]} | {
        r["embedding"] for r in a["readings"].values() if "embedding" in r
    }


def extra_embeddings(wildcards):
    """Params function of pack_samples: its readings' other embeddings (x_<embedding>.npy)."""
    return sorted(
        embeddings_of(wildcards.model) - {analysis_of(wildcards)["embedding"]}
    )


def pack_of(wildcards):
    """Input function: the job's L's pack, its source run's for a reading."""
    return results(source_run(wildcards.model), "samples", f"L{wildcards.length}")


def summary_run(model, kind):
    """The run whose summary ``kind`` a run's Table 1 reads: a reading's own only where the
    reading changes a key that summary's analyses read."""
    if model not in READING_RUNS:
        return model
    source, reading = READING_RUNS[model]
    changed = reading_changes(MODELS[source], reading)
    # a summary outside the registry (the heads' report) reads the embedding
    return model if changed & READING_KEYS_READ.get(kind, {"embedding"}) else source


def summary_of(kind, name=None):
    """Input function: summary/<name or kind>.csv of summary_run(model, kind)."""

    def summary(wildcards):
        return results(
            summary_run(wildcards.model, kind), "summary", f"{name or kind}.csv"
        )

    return summary


def replicates_of(kind):
    """Input function: summary/<kind>_replicates.parquet of summary_run(model, kind)."""

    def replicates(wildcards):
        return results(
            summary_run(wildcards.model, kind), "summary", f"{kind}_replicates.parquet"
        )

    return replicates


def compare_replicates(wildcards):
    """Input function of compare_figure: each paper model's bootstrap replicates of the claim's
    summary (summary/<claim>_replicates.parquet), in PAPER_MODELS' order."""
    return [
        results(model, "summary", f"{wildcards.claim}_replicates.parquet")
        for model in PAPER_MODELS
    ]


def reading_tables(wildcards):
    """Input function of the robustness rule: Table 1 of the model, then of its readings."""
    readings = analysis_of(wildcards)["readings"]
    runs = [wildcards.model] + [reading_run_name(wildcards.model, r) for r in readings]
    return [f"tables/{run}/table1.csv" for run in runs]


def trained_model_dir(wildcards):
    """Input function: a trained model's folder (its learned rule parameters), else nothing."""
    return model_dir(wildcards.model) if wildcards.model in STUDY_MODELS else []


def distance_targets(wildcards):
    a = analysis_of(wildcards)
    d = a["distance"]
    pairs = {(L, d["n_fixed"]) for L in a["lengths"]}
    pairs |= {(d["length_fixed"], n) for n in d["n_grid"]}
    return [
        results(wildcards.model, "analysis", "distance", f"L{L}_N{n}.parquet")
        for L, n in sorted(pairs)
    ]


def separability_targets(wildcards):
    s = analysis_of(wildcards)["separability"]
    return [
        results(
            wildcards.model, "analysis", "separability", f"L{s['length']}_N{n}.parquet"
        )
        for n in sorted(s["n_grid"])
    ]


def gradient_targets(wildcards):
    return [
        results(
            wildcards.model, "analysis", "gradient", f"T{fmt_temperature(t)}.parquet"
        )
        for t in analysis_of(wildcards)["gradient"]["temperatures"]
    ]


def pack_at(key):
    """Input function: the sample pack at the L of analysis.<key>.length (a reading's: its
    source run's)."""

    def pack(wildcards):
        length = analysis_of(wildcards)[key]["length"]
        return results(source_run(wildcards.model), "samples", f"L{length}")

    return pack


def per_length_targets(kind):
    def targets(wildcards):
        return [
            results(wildcards.model, "analysis", kind, f"L{L}.parquet")
            for L in sorted(analysis_of(wildcards)["lengths"])
        ]

    return targets


def packs_of(wildcards):
    return [
        results(wildcards.model, "samples", f"L{L}")
        for L in sorted(analysis_of(wildcards)["lengths"])
    ]


def normalizer_outputs(kind):
    def outputs(wildcards):
        return [
            results(wildcards.model, "beyond", "normalizers", name, f"{kind}.parquet")
            for name in MODELS[wildcards.model]["beyond"]["normalizers"]
        ]

    return outputs


# Per-model figures and tables land in figures/<model>/ and tables/<model>/; the default model's
# are also copied to figures/<name>.pdf and tables/<name>.csv, the paths the paper's commands use.
# The registered analyses' figures (attnlimits_workflow.registry: paper Fig. 4 among them) are
# drawn by the generic rule analysis_figure.
MODEL_FIGURES = ["fig2", "fig3", "fig5", "coverage", "heads", *ANALYSIS_FIGURES]
MODEL_TABLES = {
    "table1": ["csv", "md", "tex"],
    "table2": ["csv", "md", "tex"],
    "coverage": ["csv", "md"],
    "heads": ["csv"],
}


def table1_inputs(wildcards):
    """The table1 rule's input function. Each scored analysis's summary and its bootstrap
    replicates (the intervals and three-outcome verdicts), named by the analysis, and every
    bound check's counts, all from the registry (attnlimits_workflow.registry)."""
    summaries = {name: summary_of(name)(wildcards) for name in SCORED}
    replicates = {f"{n}_replicates": replicates_of(n)(wildcards) for n in SCORED}
    violations = [summary_of(k, f"violations_{k}")(wildcards) for k in BOUND_CHECKS]
    return {**summaries, **replicates, "violations": violations}


def analysis_settings(wildcards):
    """Params function of the generic analysis rule: the analysis section's shared keys and
    the analysis's own analysis.<name> keys, for its module's Settings (unused keys ignored).
    """
    a = analysis_of(wildcards)
    shared = (
        "protocol",
        "all_rows",
        "embedding",
        "zero_weight",
        "lengths",
        "bootstrap",
    )
    return {
        "seed": config["seed"],
        **{key: a[key] for key in shared if key in a},
        **a.get(wildcards.analysis, {}),
    }


def effective_set_tables_of(model):
    """Every (L, variant) job of a model's N* search (effective_set.smk)."""
    section = MODELS[model]["effective_set"]
    return [
        results(model, "effective_set", f"L{length}", f"{variant}.parquet")
        for length in sorted(section["lengths"])
        for variant in section["variants"]
    ]


def effective_set_tables(wildcards):
    return effective_set_tables_of(wildcards.model)


def effective_set_tokens(wildcards):
    """The chunks N* scores: a study model's held-out windows of the longest evaluation context
    (study_effective_windows), any other model's own chunks."""
    if wildcards.model in STUDY_MODELS:
        return results(wildcards.model, "effective_set", "tokens.parquet")
    return source_tokens(wildcards)


def effective_set_outputs(model):
    """A model's N* table and figure, when effective_set.enabled asks `all` for them."""
    if not MODELS[model]["effective_set"]["enabled"]:
        return []
    return [f"tables/{model}/effective_set.{ext}" for ext in ("csv", "md")] + [
        f"figures/{model}/effective_set.{ext}" for ext in ("pdf", "png")
    ]


def model_outputs(model):
    figs = [
        f"figures/{model}/{f}.{ext}" for f in MODEL_FIGURES for ext in ("pdf", "png")
    ]
    tabs = [
        f"tables/{model}/{t}.{ext}" for t, exts in MODEL_TABLES.items() for ext in exts
    ]
    if MODELS[model]["analysis"]["readings"]:
        tabs += [f"tables/{model}/robustness.{ext}" for ext in ("csv", "md")]
    tabs += effective_set_outputs(model)
    return figs + tabs + [results(model, "summary", "config.yaml")]


def default_model_copies():
    figs = [f"figures/{f}.{ext}" for f in MODEL_FIGURES for ext in ("pdf", "png")]
    tabs = [f"tables/{t}.{ext}" for t, exts in MODEL_TABLES.items() for ext in exts]
    return figs + tabs


def compare_outputs():
    figs = [f"figures/compare/{c}.{ext}" for c in COMPARED for ext in ("pdf", "png")]
    return figs + [
        "tables/compare/scorecard.csv",
        "tables/compare/scorecard.md",
        "tables/compare/at_a_glance.md",
        REPORT_TEXT,
    ]


# The HTML report's opening page: the verdicts at a glance, then workflow/report/workflow.rst.
# `snakemake --report` after `all` finds it made by the scorecard; before, the plain text.
REPORT_TEXT = "tables/compare/report.rst"


def report_text():
    made = os.path.abspath(REPORT_TEXT)
    return made if os.path.exists(made) else "workflow/report/workflow.rst"


def final_outputs():
    per_model = [path for model in PAPER_MODELS for path in model_outputs(model)]
    fig1 = [f"figures/fig1.{ext}" for ext in ("pdf", "png")]
    return fig1 + per_model + default_model_copies() + compare_outputs()


# The normalizer study (study.smk).
def study_rule(wildcards):
    return config["study"]["normalizers"][MODELS[wildcards.model]["model"]["trained"]]


def training_of(wildcards):
    """Params function of train_model: study.training, with no step for an untrained model."""
    training = config["study"]["training"]
    if MODELS[wildcards.model]["model"].get("untrained"):
        return {**training, "steps": 0}
    return training


def study_model_reports():
    """Each trained model's head report and coverage figure (beyond.smk's rules)."""
    return [
        path
        for m in TRAINED_MODELS
        for path in (
            f"figures/{m}/coverage.png",
            f"figures/{m}/heads.png",
            f"tables/{m}/heads.csv",
        )
    ]


def study_inputs(kind):
    """Per trained model, one of its normalizer job's outputs (its own rule's diagnostics)."""
    return [
        results(
            m, "beyond", "normalizers", MODELS[m]["model"]["trained"], f"{kind}.parquet"
        )
        for m in STUDY_MODELS
    ]
