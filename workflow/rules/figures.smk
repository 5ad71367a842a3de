# Final assembly: figures and tables read only the small summary tables and the style file.

# figures.style, or the repository's style file (resolved so it also works with --directory).
STYLE = config["figures"]["style"] or str(
    Path(workflow.basedir) / "workflow" / "report" / "attnlimits.mplstyle"
)


rule fig1:
    input:
        style=STYLE,
    output:
        pdf="figures/fig1.pdf",
        png=report(
            "figures/fig1.png", caption="../report/fig1.rst", category="Illustration"
        ),
    log:
        "logs/figures/fig1.log",
    conda:
        "../envs/analysis.yaml"
    params:
        seed=config["seed"],
    script:
        "../scripts/plot_fig1.py"


rule fig2:
    input:
        style=STYLE,
        distance=results("{model}", "summary", "distance.csv"),
        critical_n=results("{model}", "summary", "critical_n.csv"),
        critical_n_replicates=results(
            "{model}", "summary", "critical_n_replicates.parquet"
        ),
        run=results("{model}", "summary", "run.json"),
    output:
        pdf="figures/{model}/fig2.pdf",
        png=report(
            "figures/{model}/fig2.png",
            caption="../report/fig2.rst",
            category="{model}",
            subcategory="Figures",
        ),
    log:
        "logs/{model}/figures/fig2.log",
    conda:
        "../envs/analysis.yaml"
    params:
        distance=model_setting("analysis", "distance"),
        masked=model_setting("analysis", "all_rows", "masked"),
        level=model_setting("analysis", "bootstrap", "level"),
        ks_alpha=model_setting("analysis", "critical_n", "ks_alpha"),
        mc_rows=model_setting("analysis", "all_rows", "mc_rows"),
    script:
        "../scripts/plot_fig2.py"


rule fig3:
    input:
        style=STYLE,
        separability=results("{model}", "summary", "separability.csv"),
        replicates=results("{model}", "summary", "separability_replicates.parquet"),
        run=results("{model}", "summary", "run.json"),
    output:
        pdf="figures/{model}/fig3.pdf",
        png=report(
            "figures/{model}/fig3.png",
            caption="../report/fig3.rst",
            category="{model}",
            subcategory="Figures",
        ),
    log:
        "logs/{model}/figures/fig3.log",
    conda:
        "../envs/analysis.yaml"
    params:
        level=model_setting("analysis", "bootstrap", "level"),
        zero_weight=model_setting("analysis", "zero_weight"),
    script:
        "../scripts/plot_fig3.py"


# The registered analyses' figures (a record's figure in attnlimits_workflow.registry): the
# module's figure() of its summary, captioned from the record's caption
# (workflow/report/analysis_figure.rst renders it).
rule analysis_figure:
    input:
        style=STYLE,
        summary=lambda wildcards: results(
            wildcards.model, "summary", f"{ANALYSIS_FIGURES[wildcards.figure]}.csv"
        ),
        run=results("{model}", "summary", "run.json"),
    output:
        pdf="figures/{model}/{figure}.pdf",
        png=report(
            "figures/{model}/{figure}.png",
            caption="../report/analysis_figure.rst",
            category="{model}",
            subcategory="Figures",
        ),
    log:
        "logs/{model}/figures/{figure}.log",
    wildcard_constraints:
        figure=name_pattern(ANALYSIS_FIGURES),
    conda:
        "../envs/analysis.yaml"
    params:
        analysis=lambda wildcards: ANALYSIS_FIGURES[wildcards.figure],
        caption=lambda wildcards: figure_caption(wildcards.figure),
    script:
        "../scripts/plot_analysis.py"


# A reading of analysis.readings (run <model>~<reading>) takes its source model's summaries
# where it changes no key their analyses read (summary_run).
rule table1:
    input:
        # the registry's scored analyses' summaries and replicates, and every bound check
        unpack(table1_inputs),
        run=results("{model}", "summary", "run.json"),
        claims=workflow.source_path("../resources/paper_claims.yaml"),
    output:
        csv=report(
            "tables/{model}/table1.csv",
            caption="../report/table1.rst",
            category="{model}",
            subcategory="Tables",
        ),
        md="tables/{model}/table1.md",
        tex="tables/{model}/table1.tex",
    log:
        "logs/{model}/tables/table1.log",
    wildcard_constraints:
        # the paper's bound checks assume its softmax rows (weights >= 0 summing to one), which
        # the study's other normalizers need not give: no Table 1 for study models (review 46);
        # the paper models' readings (added to MODELS after PAPER_MODELS) keep theirs
        model=name_pattern([m for m in MODELS if m not in STUDY_MODELS]),
    conda:
        "../envs/analysis.yaml"
    params:
        analysis=model_setting("analysis"),
    script:
        "../scripts/make_table1.py"


# Every claim of Table 1 under every reading of analysis.readings (and both readings of a causal
# row's masked keys), robust or fragile (attnlimits_workflow.robustness).
rule robustness:
    input:
        tables=reading_tables,
    output:
        csv="tables/{model}/robustness.csv",
        md="tables/{model}/robustness.md",
    log:
        "logs/{model}/tables/robustness.log",
    conda:
        "../envs/analysis.yaml"
    params:
        readings=lambda wildcards: ["default", *analysis_of(wildcards)["readings"]],
        masked=model_setting("analysis", "all_rows", "masked"),
        # per reading, the summaries it has its own of (it changes a key they read)
        applies=lambda wildcards: {
            reading: [
                kind
                for kind in sorted({*READING_KEYS_READ, *BOUND_CHECKS})
                if summary_run(reading_run_name(wildcards.model, reading), kind)
                != wildcards.model
            ]
            for reading in analysis_of(wildcards)["readings"]
        },
    script:
        "../scripts/make_robustness.py"


rule effective_config:
    output:
        report(
            results("{model}", "summary", "config.yaml"),
            caption="../report/config.rst",
            category="{model}",
            subcategory="Configuration",
        ),
    log:
        "logs/{model}/tables/effective_config.log",
    conda:
        "../envs/analysis.yaml"
    params:
        config=lambda wildcards: MODELS[wildcards.model],
    script:
        "../scripts/write_config.py"


# The paper's commands (`snakemake figures/fig3.pdf`) build the default model's figure.
rule default_model_figure:
    input:
        f"figures/{DEFAULT_MODEL}/{{figure}}.{{ext}}",
    output:
        "figures/{figure}.{ext}",
    log:
        "logs/default_model/figures/{figure}.{ext}.log",
    wildcard_constraints:
        figure="|".join(MODEL_FIGURES),
        ext="pdf|png",
    conda:
        "../envs/analysis.yaml"
    shell:
        "cp {input} {output} 2> {log}"


rule default_model_table:
    input:
        f"tables/{DEFAULT_MODEL}/{{table}}.{{ext}}",
    output:
        "tables/{table}.{ext}",
    log:
        "logs/default_model/tables/{table}.{ext}.log",
    wildcard_constraints:
        table="|".join(MODEL_TABLES),
        ext="csv|md|tex",
    conda:
        "../envs/analysis.yaml"
    shell:
        "cp {input} {output} 2> {log}"
