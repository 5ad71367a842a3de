# attnlimits: reproduce and extend "Limitations of Normalization in Attention Mechanism"
# (Mudarisov et al., NeurIPS 2025). Stages: corpus -> model -> chunks -> extraction (the only
# model pass) -> per-parameter analyses -> summaries -> figures, tables and report.

import os

# Memory settings the jobs inherit; each one set in the environment already wins.
# - NUMPY_MADVISE_HUGEPAGE=0: numpy asks for transparent huge pages for every large array; where
#   THP is in "madvise" mode (Ubuntu's default) a first touch may then stall on compaction
#   (development VM: L=1024 critical N 4.5-5.6 s with it, 4.0-4.2 s without).
# - MALLOC_*: glibc serves every allocation above 128 KiB-32 MiB with a fresh mmap and returns
#   freed memory to the kernel, so the analyses' blockwise float64 temporaries (a few MiB each,
#   thousands per job) page-fault on every reuse. Keeping them on the heap: separability L=1024
#   1.64 -> 0.92 s, critical N L=1024 5.1 -> 4.0 s, the head report 10.3 -> 8.5 s (same outputs;
#   peak memory unchanged, freed memory kept by the job until it exits). Other C libraries
#   ignore these.
for _name, _value in {
    "NUMPY_MADVISE_HUGEPAGE": "0",
    "MALLOC_MMAP_THRESHOLD_": str(256 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    "MALLOC_TOP_PAD_": str(64 << 20),
}.items():
    os.environ.setdefault(_name, _value)


# Resolved against the repository, so `snakemake -d elsewhere` finds the defaults too.
configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/extract.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/beyond.smk"
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
