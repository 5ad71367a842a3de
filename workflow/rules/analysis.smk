# Per-parameter analysis jobs; none imports torch. Every analysis reads a per-L sample pack:
# the dumps decoded once into .npy arrays that each job memory-maps (gradient and vanishing map
# only the small logits/weights/norms arrays, so decoding Parquet per job is avoided). Packs are
# kept (not temp): rebuilding one for a new job would mark every other job of its L as
# "updated by another job" and rerun it. Results are tidy Parquet tables, one row per sample
# (layer, chunk, head).


rule pack_samples:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        directory(results("samples", "L{length}")),
    log:
        "logs/analysis/pack/L{length}.log",
    benchmark:
        "results/benchmarks/analysis/pack/L{length}.tsv"
    priority: 3
    conda:
        "../envs/attnlimits.yaml"
    params:
        embedding=ANALYSIS["embedding"],
        with_rows=ANALYSIS["protocol"] == "all_rows",
    script:
        "../scripts/pack_samples.py"


rule distance:
    input:
        pack=results("samples", "L{length}"),
    output:
        results("analysis", "distance", "L{length}_N{n}.parquet"),
    log:
        "logs/analysis/distance/L{length}_N{n}.log",
    benchmark:
        "results/benchmarks/analysis/distance/L{length}_N{n}.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        embedding=ANALYSIS["embedding"],
        mc_draws=ANALYSIS["distance"]["mc_draws"],
        mc_strata=ANALYSIS["distance"]["mc_strata"],
        mc_max_draws=ANALYSIS["distance"]["mc_max_draws"],
        mc_target_rel_stderr=ANALYSIS["distance"]["mc_target_rel_stderr"],
        seed=config["seed"],
        protocol=ANALYSIS["protocol"],
        all_rows=ANALYSIS["all_rows"],
        n_fixed=ANALYSIS["distance"]["n_fixed"],
    script:
        "../scripts/analyse_distance.py"


rule critical_n:
    input:
        pack=results("samples", "L{length}"),
    output:
        results("analysis", "critical_n", "L{length}.parquet"),
    log:
        "logs/analysis/critical_n/L{length}.log",
    benchmark:
        "results/benchmarks/analysis/critical_n/L{length}.tsv"
    priority: 2
    conda:
        "../envs/attnlimits.yaml"
    params:
        embedding=ANALYSIS["embedding"],
        ks_alpha=ANALYSIS["critical_n"]["ks_alpha"],
        mc_draws=ANALYSIS["critical_n"]["mc_draws"],
        seed=config["seed"],
        protocol=ANALYSIS["protocol"],
        all_rows=ANALYSIS["all_rows"],
    script:
        "../scripts/analyse_critical_n.py"


rule pairwise_separation:
    input:
        pack=results("samples", "L{length}"),
    output:
        results("analysis", "separation", "L{length}.parquet"),
    log:
        "logs/analysis/separation/L{length}.log",
    benchmark:
        "results/benchmarks/analysis/separation/L{length}.tsv"
    priority: 2
    conda:
        "../envs/attnlimits.yaml"
    params:
        embedding=ANALYSIS["embedding"],
        radius=ANALYSIS["separability"]["radius"],
    script:
        "../scripts/analyse_separation.py"


rule separability:
    input:
        pack=results("samples", "L{length}"),
        separation=results("analysis", "separation", "L{length}.parquet"),
    output:
        results("analysis", "separability", "L{length}_N{n}.parquet"),
    log:
        "logs/analysis/separability/L{length}_N{n}.log",
    benchmark:
        "results/benchmarks/analysis/separability/L{length}_N{n}.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        embedding=ANALYSIS["embedding"],
        radius=ANALYSIS["separability"]["radius"],
        delta_over=ANALYSIS["separability"]["delta_over"],
        protocol=ANALYSIS["protocol"],
        all_rows=ANALYSIS["all_rows"],
    script:
        "../scripts/analyse_separability.py"


rule gradient:
    input:
        pack=results("samples", f"L{ANALYSIS['gradient']['length']}"),
    output:
        results("analysis", "gradient", "T{temperature}.parquet"),
    log:
        "logs/analysis/gradient/T{temperature}.log",
    benchmark:
        "results/benchmarks/analysis/gradient/T{temperature}.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        epsilons=ANALYSIS["gradient"]["epsilons"],
        directions=ANALYSIS["gradient"]["directions"],
        temperature_on=ANALYSIS["gradient"]["temperature_on"],
        seed=config["seed"],
        protocol=ANALYSIS["protocol"],
        all_rows=ANALYSIS["all_rows"],
    script:
        "../scripts/analyse_gradient.py"


rule vanishing:
    input:
        pack=results("samples", "L{length}"),
    output:
        results("analysis", "vanishing", "L{length}.parquet"),
    log:
        "logs/analysis/vanishing/L{length}.log",
    benchmark:
        "results/benchmarks/analysis/vanishing/L{length}.tsv"
    conda:
        "../envs/attnlimits.yaml"
    script:
        "../scripts/analyse_vanishing.py"


rule summarise_distance:
    input:
        distance=distance_targets(),
        critical_n=per_length_targets("critical_n"),
    output:
        distance=results("summary", "distance.csv"),
        critical_n=results("summary", "critical_n.csv"),
        violations=results("summary", "violations_distance.csv"),
    log:
        "logs/summarise/distance.log",
    benchmark:
        "results/benchmarks/summarise/distance.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        kind="distance",
    script:
        "../scripts/summarise.py"


rule summarise_separability:
    input:
        separability=separability_targets(),
    output:
        separability=results("summary", "separability.csv"),
        violations=results("summary", "violations_separability.csv"),
    log:
        "logs/summarise/separability.log",
    benchmark:
        "results/benchmarks/summarise/separability.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        kind="separability",
    script:
        "../scripts/summarise.py"


rule summarise_gradient:
    input:
        gradient=gradient_targets(),
    output:
        gradient=results("summary", "gradient.csv"),
        violations=results("summary", "violations_gradient.csv"),
    log:
        "logs/summarise/gradient.log",
    benchmark:
        "results/benchmarks/summarise/gradient.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        kind="gradient",
    script:
        "../scripts/summarise.py"


rule summarise_vanishing:
    input:
        vanishing=per_length_targets("vanishing"),
    output:
        vanishing=results("summary", "vanishing.csv"),
        violations=results("summary", "violations_vanishing.csv"),
    log:
        "logs/summarise/vanishing.log",
    benchmark:
        "results/benchmarks/summarise/vanishing.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        kind="vanishing",
    script:
        "../scripts/summarise.py"


rule describe_run:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        results("summary", "run.json"),
    log:
        "logs/summarise/describe_run.log",
    benchmark:
        "results/benchmarks/summarise/describe_run.tsv"
    conda:
        "../envs/attnlimits.yaml"
    params:
        corpus=CORPUS,
        model=MODEL,
        embedding=ANALYSIS["embedding"],
        query_row=config["extraction"]["query_row"],
        protocol=ANALYSIS["protocol"],
        masked=ANALYSIS["all_rows"]["masked"],
        all_rows_chunks=ANALYSIS["all_rows"]["chunks"],
    script:
        "../scripts/describe_run.py"
