# attnlimits: reproduce and extend "Limitations of Normalization in Attention Mechanism"
# (Mudarisov et al., NeurIPS 2025). Stages: corpus -> model -> chunks -> extraction (the only
# model pass) -> per-parameter analyses -> summaries -> figures, tables and report.


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/extract.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
