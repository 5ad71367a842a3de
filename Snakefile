# attnlimits: reproduce and extend "Limitations of Normalization in Attention Mechanism"
# (Mudarisov et al., NeurIPS 2025). Stages: corpus -> model -> chunks -> extraction (the only
# model pass) -> per-parameter analyses -> summaries -> figures, tables and report.

import os


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


# Downloads need the internet, which cluster compute nodes often lack: run them where Snakemake runs.
localrules:
    all,
    download_corpus,
    fetch_model,


rule all:
    default_target: True
    input:
        final_outputs(),
