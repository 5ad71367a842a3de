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
        png=report("figures/fig1.png", caption="../report/fig1.rst", category="Figures"),
    log:
        "logs/figures/fig1.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        seed=config["seed"],
    script:
        "../scripts/plot_fig1.py"


rule fig2:
    input:
        style=STYLE,
        distance=results("summary", "distance.csv"),
        critical_n=results("summary", "critical_n.csv"),
        run=results("summary", "run.json"),
    output:
        pdf="figures/fig2.pdf",
        png=report("figures/fig2.png", caption="../report/fig2.rst", category="Figures"),
    log:
        "logs/figures/fig2.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        distance=ANALYSIS["distance"],
        masked=ANALYSIS["all_rows"]["masked"],
    script:
        "../scripts/plot_fig2.py"


rule fig3:
    input:
        style=STYLE,
        separability=results("summary", "separability.csv"),
        run=results("summary", "run.json"),
    output:
        pdf="figures/fig3.pdf",
        png=report("figures/fig3.png", caption="../report/fig3.rst", category="Figures"),
    log:
        "logs/figures/fig3.log",
    conda:
        "../envs/attnlimits.yaml"
    script:
        "../scripts/plot_fig3.py"


rule fig4:
    input:
        style=STYLE,
        gradient=results("summary", "gradient.csv"),
        run=results("summary", "run.json"),
    output:
        pdf="figures/fig4.pdf",
        png=report("figures/fig4.png", caption="../report/fig4.rst", category="Figures"),
    log:
        "logs/figures/fig4.log",
    conda:
        "../envs/attnlimits.yaml"
    script:
        "../scripts/plot_fig4.py"


rule table1:
    input:
        distance=results("summary", "distance.csv"),
        critical_n=results("summary", "critical_n.csv"),
        separability=results("summary", "separability.csv"),
        gradient=results("summary", "gradient.csv"),
        vanishing=results("summary", "vanishing.csv"),
        violations=[
            results("summary", f"violations_{kind}.csv")
            for kind in ("distance", "separability", "gradient", "vanishing")
        ],
        run=results("summary", "run.json"),
        claims=workflow.source_path("../resources/paper_claims.yaml"),
    output:
        csv=report(
            "tables/table1.csv", caption="../report/table1.rst", category="Tables"
        ),
        md="tables/table1.md",
        tex="tables/table1.tex",
    log:
        "logs/tables/table1.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        analysis=ANALYSIS,
    script:
        "../scripts/make_table1.py"


rule effective_config:
    output:
        report(
            results("summary", "config.yaml"),
            caption="../report/config.rst",
            category="Configuration",
        ),
    log:
        "logs/tables/effective_config.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        config=config,
    script:
        "../scripts/write_config.py"
