# Beyond the paper: the diagnostics under other normalizers (one job per normalizer, over every
# L), multi-head coverage and the per-head saturation report (one job at the separability L),
# then their figures and tables. See docs/normalizers.md.


wildcard_constraints:
    normalizer=r"[A-Za-z0-9_.-]+",


rule normalizer:
    input:
        packs=[results("samples", f"L{L}") for L in sorted(ANALYSIS["lengths"])],
    output:
        samples=results("beyond", "normalizers", "{normalizer}", "samples.parquet"),
        critical_n=results(
            "beyond", "normalizers", "{normalizer}", "critical_n.parquet"
        ),
        separability=results(
            "beyond", "normalizers", "{normalizer}", "separability.parquet"
        ),
    log:
        "logs/beyond/normalizer/{normalizer}.log",
    benchmark:
        "results/benchmarks/beyond/normalizer/{normalizer}.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        entry=lambda wc: BEYOND["normalizers"][wc.normalizer],
        max_samples=BEYOND["max_samples"],
        n_fixed=ANALYSIS["distance"]["n_fixed"],
        ks_alpha=ANALYSIS["critical_n"]["ks_alpha"],
        mc_draws=ANALYSIS["critical_n"]["mc_draws"],
        separability_length=ANALYSIS["separability"]["length"],
        n_grid=sorted(ANALYSIS["separability"]["n_grid"]),
        radius=ANALYSIS["separability"]["radius"],
        seed=config["seed"],
    script:
        "../scripts/analyse_normalizer.py"


rule heads:
    input:
        pack=results("samples", f"L{ANALYSIS['separability']['length']}"),
    output:
        coverage=results("beyond", "coverage.parquet"),
        heads=results("beyond", "heads.parquet"),
    log:
        "logs/beyond/heads.log",
    benchmark:
        "results/benchmarks/beyond/heads.tsv"
    priority: 2
    conda:
        "../envs/attnlimits.yaml"
    params:
        n=BEYOND["n"],
        n_grid=sorted(ANALYSIS["separability"]["n_grid"]),
        radius=ANALYSIS["separability"]["radius"],
        ks_alpha=ANALYSIS["critical_n"]["ks_alpha"],
        mc_draws=ANALYSIS["critical_n"]["mc_draws"],
        seed=config["seed"],
    script:
        "../scripts/analyse_heads.py"


rule summarise_normalizers:
    input:
        samples=normalizer_outputs("samples"),
        critical_n=normalizer_outputs("critical_n"),
        separability=normalizer_outputs("separability"),
    output:
        by_length=results("summary", "normalizers.csv"),
        separability=results("summary", "normalizers_separability.csv"),
    log:
        "logs/summarise/normalizers.log",
    benchmark:
        "results/benchmarks/summarise/normalizers.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        normalizers=BEYOND["normalizers"],
    script:
        "../scripts/summarise_normalizers.py"


rule fig5:
    input:
        style=STYLE,
        by_length=results("summary", "normalizers.csv"),
        separability=results("summary", "normalizers_separability.csv"),
        run=results("summary", "run.json"),
    output:
        pdf="figures/fig5.pdf",
        png=report("figures/fig5.png", caption="../report/fig5.rst", category="Figures"),
    log:
        "logs/figures/fig5.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        n_fixed=ANALYSIS["distance"]["n_fixed"],
        n=BEYOND["n"],
    script:
        "../scripts/plot_fig5.py"


rule table2:
    input:
        by_length=results("summary", "normalizers.csv"),
        separability=results("summary", "normalizers_separability.csv"),
        run=results("summary", "run.json"),
    output:
        csv=report(
            "tables/table2.csv", caption="../report/table2.rst", category="Tables"
        ),
        md="tables/table2.md",
        tex="tables/table2.tex",
    log:
        "logs/tables/table2.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        normalizers=BEYOND["normalizers"],
        n=BEYOND["n"],
    script:
        "../scripts/make_table2.py"


rule coverage_report:
    input:
        style=STYLE,
        coverage=results("beyond", "coverage.parquet"),
        run=results("summary", "run.json"),
    output:
        pdf="figures/coverage.pdf",
        png=report(
            "figures/coverage.png",
            caption="../report/coverage.rst",
            category="Figures",
        ),
        csv="tables/coverage.csv",
        md="tables/coverage.md",
    log:
        "logs/figures/coverage.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        n=BEYOND["n"],
    script:
        "../scripts/report_coverage.py"


rule head_report:
    input:
        style=STYLE,
        heads=results("beyond", "heads.parquet"),
        run=results("summary", "run.json"),
    output:
        csv=report("tables/heads.csv", caption="../report/heads.rst", category="Tables"),
        pdf="figures/heads.pdf",
        png=report(
            "figures/heads.png", caption="../report/heads.rst", category="Figures"
        ),
    log:
        "logs/figures/heads.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        ns_ratio_threshold=BEYOND["ns_ratio_threshold"],
        temperature_threshold=BEYOND["temperature_threshold"],
    script:
        "../scripts/report_heads.py"
