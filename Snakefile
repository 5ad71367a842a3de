# attnlimits: reproduce and extend "Limitations of Normalization in Attention Mechanism"
# (Mudarisov et al., NeurIPS 2025). Stages: corpus -> model -> chunks -> extraction (the only
# model pass) -> per-parameter analyses -> summaries -> figures, tables and report.

import os

# Settings the jobs inherit; each one set in the environment already wins (docs/performance.md has
# what the memory ones gain).
# - NUMPY_MADVISE_HUGEPAGE=0: numpy asks for transparent huge pages for every large array; where
#   THP is in "madvise" mode (Ubuntu's default) a first touch may then stall on compaction.
# - MALLOC_*: glibc serves every allocation above 128 KiB-32 MiB with a fresh mmap and returns
#   freed memory to the kernel, so the analyses' blockwise float64 temporaries (a few MiB each,
#   thousands per job) would page-fault on every reuse; these keep them on the heap until the job
#   exits. Other C libraries ignore them.
# - HF_HUB_DISABLE_PROGRESS_BARS, TQDM_DISABLE: transformers' "Loading weights" bar and the GGUF
#   reader's de-quantizing bar would fill the terminal of every model job; the jobs' logs carry
#   their progress instead.
for _name, _value in {
    "NUMPY_MADVISE_HUGEPAGE": "0",
    "MALLOC_MMAP_THRESHOLD_": str(256 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    "MALLOC_TOP_PAD_": str(64 << 20),
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",
}.items():
    os.environ.setdefault(_name, _value)

# Every job imports this checkout's attnlimits package from src/, whichever environment runs it:
# the per-rule conda environments (workflow/envs/) carry its dependencies, not the package.
# (A user's own PYTHONPATH is optional and kept after it, so no envvars directive.)
_search_path = "PYTHONPATH"
_src = os.path.join(workflow.basedir, "src")
_paths = [p for p in os.environ.get(_search_path, "").split(os.pathsep) if p]
if _src not in _paths:
    os.environ[_search_path] = os.pathsep.join([_src, *_paths])


# Resolved against the repository, so `snakemake -d elsewhere` finds the defaults too.
configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "workflow/rules/common.smk"


report: report_text()


include: "workflow/rules/corpus.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/extract.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/beyond.smk"
include: "workflow/rules/effective_set.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/study.smk"


# Downloads need the internet, which cluster compute nodes often lack, and the default model's
# copies are one cp each: run them where Snakemake runs.
localrules:
    all,
    download_corpus,
    fetch_model,
    default_model_figure,
    default_model_table,


rule all:
    default_target: True
    input:
        final_outputs(),
