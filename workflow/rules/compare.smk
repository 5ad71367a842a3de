# Models side by side: one figure per claim of the paper, the scorecard, and the findings page.


# Every configured model side by side: one figure per claim, and the scorecard.
rule compare_figure:
    input:
        style=STYLE,
        summaries=[results(model, "summary", "{claim}.csv") for model in PAPER_MODELS],
        # the intervals each model's error bars draw
        replicates=compare_replicates,
        runs=[results(model, "summary", "run.json") for model in PAPER_MODELS],
    output:
        pdf="figures/compare/{claim}.pdf",
        png=report(
            "figures/compare/{claim}.png",
            caption="../report/compare.rst",
            category="Models side by side",
        ),
    log:
        "logs/compare/{claim}.log",
    wildcard_constraints:
        claim="|".join(COMPARED),
    conda:
        "../envs/analysis.yaml"
    params:
        models=PAPER_MODELS,
        n_fixed={m: MODELS[m]["analysis"]["distance"]["n_fixed"] for m in PAPER_MODELS},
        ks_alpha={
            m: MODELS[m]["analysis"]["critical_n"]["ks_alpha"] for m in PAPER_MODELS
        },
        level={m: MODELS[m]["analysis"]["bootstrap"]["level"] for m in PAPER_MODELS},
        unit={m: MODELS[m]["analysis"]["bootstrap"]["unit"] for m in PAPER_MODELS},
    script:
        "../scripts/plot_compare.py"


rule scorecard:
    input:
        tables=[f"tables/{model}/table1.csv" for model in PAPER_MODELS],
        runs=[results(model, "summary", "run.json") for model in PAPER_MODELS],
        configs=[results(model, "summary", "config.yaml") for model in PAPER_MODELS],
        description=workflow.source_path("../report/workflow.rst"),
    output:
        csv=report(
            "tables/compare/scorecard.csv",
            caption="../report/scorecard.rst",
            category="Models side by side",
        ),
        md="tables/compare/scorecard.md",
        # every claim on every model, one mark per verdict (docs/findings.md opens with it)
        glance="tables/compare/at_a_glance.md",
        # the HTML report's opening page: the same table, then workflow.rst (report_text)
        report_text=REPORT_TEXT,
    log:
        "logs/compare/scorecard.log",
    conda:
        "../envs/analysis.yaml"
    params:
        models=PAPER_MODELS,
    script:
        "../scripts/make_scorecard.py"


# docs/findings.md: the paper's claims on the configured models (config/findings.yaml), every
# number from this run. Not part of `all`: it writes into docs/.
rule findings:
    input:
        template=workflow.source_path("../resources/findings_template.md"),
        scorecard="tables/compare/scorecard.csv",
        figures=[f"figures/compare/{claim}.png" for claim in COMPARED],
        runs=[results(model, "summary", "run.json") for model in PAPER_MODELS],
        configs=[results(model, "summary", "config.yaml") for model in PAPER_MODELS],
        readings=[f"tables/{model}/robustness.csv" for model in READ_MODELS],
        effective_set=[f"tables/{model}/effective_set.csv" for model in N_STAR_MODELS],
        effective_set_correlations=[
            f"tables/{model}/effective_set_correlations.csv" for model in N_STAR_MODELS
        ],
        effective_set_figures=[
            f"figures/{model}/effective_set.png" for model in N_STAR_MODELS
        ],
    output:
        page="docs/findings.md",
        figures=directory("docs/findings"),
    log:
        "logs/compare/findings.log",
    conda:
        "../envs/analysis.yaml"
    params:
        models=PAPER_MODELS,
        read_models=READ_MODELS,
        n_star_models=N_STAR_MODELS,
        tau={model: MODELS[model]["effective_set"]["tau"] for model in N_STAR_MODELS},
        command="snakemake --cores 2 docs/findings.md --configfile config/findings.yaml",
    script:
        "../scripts/write_findings.py"
