# N*, the effective attention set size (docs/effective-set.md): one job per (L, variant), each the
# plain forward and the intervened ones its search asks for, then the model's table and figure
# beside the critical N.


wildcard_constraints:
    variant=r"[a-z]+-[a-z]+",


rule effective_set:
    input:
        tokens=effective_set_tokens,
        model=source_model_dir,
    output:
        results("{model}", "effective_set", "L{length}", "{variant}.parquet"),
    log:
        "logs/{model}/effective_set/L{length}/{variant}.log",
    benchmark:
        results("{model}", "benchmarks", "effective_set", "L{length}", "{variant}.tsv")
    conda:
        "../envs/model.yaml"
    threads: model_setting("effective_set", "threads")
    resources:
        mem_mb=model_setting("effective_set", "mem_mb"),
        gpu=lambda wildcards: int(
            MODELS[wildcards.model]["effective_set"]["device"].startswith("cuda")
        ),
    params:
        section=model_setting("effective_set"),
        seed=config["seed"],
    script:
        "../scripts/effective_set.py"


rule effective_set_report:
    input:
        style=STYLE,
        tables=effective_set_tables,
        critical_n=results("{model}", "summary", "critical_n.csv"),
        run=results("{model}", "summary", "run.json"),
    output:
        csv="tables/{model}/effective_set.csv",
        md="tables/{model}/effective_set.md",
        correlations="tables/{model}/effective_set_correlations.csv",
        pdf="figures/{model}/effective_set.pdf",
        png=report(
            "figures/{model}/effective_set.png",
            caption="../report/effective_set.rst",
            category="{model}",
            subcategory="Figures",
        ),
    log:
        "logs/{model}/figures/effective_set.log",
    conda:
        "../envs/analysis.yaml"
    params:
        section=model_setting("effective_set"),
        bootstrap=model_setting("analysis", "bootstrap"),
        masked=model_setting("analysis", "all_rows", "masked"),
        ks_alpha=model_setting("analysis", "critical_n", "ks_alpha"),
        seed=config["seed"],
    script:
        "../scripts/report_effective_set.py"
