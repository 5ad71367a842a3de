# Beyond the paper: the diagnostics under other normalizers (one job per normalizer, over every
# L), multi-head coverage and the per-head saturation report (one job at the separability L),
# then their figures and tables. See docs/normalizers.md.


wildcard_constraints:
    normalizer=r"[A-Za-z0-9_.-]+",


rule normalizer:
    input:
        packs=packs_of,
        model=trained_model_dir,
    output:
        samples=results(
            "{model}", "beyond", "normalizers", "{normalizer}", "samples.parquet"
        ),
        critical_n=results(
            "{model}", "beyond", "normalizers", "{normalizer}", "critical_n.parquet"
        ),
        separability=results(
            "{model}", "beyond", "normalizers", "{normalizer}", "separability.parquet"
        ),
    log:
        "logs/{model}/beyond/normalizer/{normalizer}.log",
    benchmark:
        results("{model}", "benchmarks", "beyond", "normalizer", "{normalizer}.tsv")
    conda:
        "../envs/model.yaml"
    params:
        entry=lambda wildcards: MODELS[wildcards.model]["beyond"]["normalizers"][
            wildcards.normalizer
        ],
        max_samples=model_setting("beyond", "max_samples"),
        n_fixed=model_setting("analysis", "distance", "n_fixed"),
        zero_weight=model_setting("analysis", "zero_weight"),
        ks_alpha=model_setting("analysis", "critical_n", "ks_alpha"),
        mc_draws=model_setting("analysis", "critical_n", "mc_draws"),
        critical_n_fractions=model_setting(
            "analysis", "all_rows", "critical_n_fractions"
        ),
        critical_n_band_edges=model_setting(
            "analysis", "all_rows", "critical_n_band_edges"
        ),
        separability_length=model_setting("analysis", "separability", "length"),
        n_grid=lambda wildcards: sorted(
            analysis_of(wildcards)["separability"]["n_grid"]
        ),
        radius=model_setting("analysis", "separability", "radius"),
        seed=config["seed"],
    script:
        "../scripts/analyse_normalizer.py"


rule heads:
    input:
        pack=pack_at("separability"),
    output:
        coverage=results("{model}", "beyond", "coverage.parquet"),
        heads=results("{model}", "beyond", "heads.parquet"),
    log:
        "logs/{model}/beyond/heads.log",
    benchmark:
        results("{model}", "benchmarks", "beyond", "heads.tsv")
    priority: 2
    conda:
        "../envs/analysis.yaml"
    params:
        n=model_setting("beyond", "n"),
        n_grid=lambda wildcards: sorted(
            analysis_of(wildcards)["separability"]["n_grid"]
        ),
        radius=model_setting("analysis", "separability", "radius"),
        ks_alpha=model_setting("analysis", "critical_n", "ks_alpha"),
        mc_draws=model_setting("analysis", "critical_n", "mc_draws"),
        critical_n_fractions=model_setting(
            "analysis", "all_rows", "critical_n_fractions"
        ),
        critical_n_band_edges=model_setting(
            "analysis", "all_rows", "critical_n_band_edges"
        ),
        seed=config["seed"],
        zero_weight=model_setting("analysis", "zero_weight"),
    script:
        "../scripts/analyse_heads.py"


rule summarise_normalizers:
    input:
        samples=normalizer_outputs("samples"),
        critical_n=normalizer_outputs("critical_n"),
        separability=normalizer_outputs("separability"),
    output:
        by_length=results("{model}", "summary", "normalizers.csv"),
        separability=results("{model}", "summary", "normalizers_separability.csv"),
    log:
        "logs/{model}/summarise/normalizers.log",
    benchmark:
        results("{model}", "benchmarks", "summarise", "normalizers.tsv")
    conda:
        "../envs/analysis.yaml"
    params:
        normalizers=model_setting("beyond", "normalizers"),
    script:
        "../scripts/summarise_normalizers.py"


rule fig5:
    input:
        style=STYLE,
        by_length=results("{model}", "summary", "normalizers.csv"),
        separability=results("{model}", "summary", "normalizers_separability.csv"),
        run=results("{model}", "summary", "run.json"),
    output:
        pdf="figures/{model}/fig5.pdf",
        png=report(
            "figures/{model}/fig5.png",
            caption="../report/fig5.rst",
            category="{model}",
            subcategory="Figures",
        ),
    log:
        "logs/{model}/figures/fig5.log",
    conda:
        "../envs/analysis.yaml"
    params:
        n_fixed=model_setting("analysis", "distance", "n_fixed"),
        n=model_setting("beyond", "n"),
    script:
        "../scripts/plot_fig5.py"


rule table2:
    input:
        by_length=results("{model}", "summary", "normalizers.csv"),
        separability=results("{model}", "summary", "normalizers_separability.csv"),
        run=results("{model}", "summary", "run.json"),
    output:
        csv=report(
            "tables/{model}/table2.csv",
            caption="../report/table2.rst",
            category="{model}",
            subcategory="Tables",
        ),
        md="tables/{model}/table2.md",
        tex="tables/{model}/table2.tex",
    log:
        "logs/{model}/tables/table2.log",
    conda:
        "../envs/analysis.yaml"
    params:
        normalizers=model_setting("beyond", "normalizers"),
        n=model_setting("beyond", "n"),
    script:
        "../scripts/make_table2.py"


rule coverage_report:
    input:
        style=STYLE,
        coverage=results("{model}", "beyond", "coverage.parquet"),
        run=results("{model}", "summary", "run.json"),
    output:
        pdf="figures/{model}/coverage.pdf",
        png=report(
            "figures/{model}/coverage.png",
            caption="../report/coverage.rst",
            category="{model}",
            subcategory="Figures",
        ),
        csv="tables/{model}/coverage.csv",
        md="tables/{model}/coverage.md",
    log:
        "logs/{model}/figures/coverage.log",
    conda:
        "../envs/analysis.yaml"
    params:
        n=model_setting("beyond", "n"),
    script:
        "../scripts/report_coverage.py"


rule head_report:
    input:
        style=STYLE,
        heads=results("{model}", "beyond", "heads.parquet"),
        run=results("{model}", "summary", "run.json"),
    output:
        csv=report(
            "tables/{model}/heads.csv",
            caption="../report/heads.rst",
            category="{model}",
            subcategory="Tables",
        ),
        pdf="figures/{model}/heads.pdf",
        png=report(
            "figures/{model}/heads.png",
            caption="../report/heads.rst",
            category="{model}",
            subcategory="Figures",
        ),
    log:
        "logs/{model}/figures/heads.log",
    conda:
        "../envs/analysis.yaml"
    params:
        ns_ratio_threshold=model_setting("beyond", "ns_ratio_threshold"),
        temperature_threshold=model_setting("beyond", "temperature_threshold"),
    script:
        "../scripts/report_heads.py"
