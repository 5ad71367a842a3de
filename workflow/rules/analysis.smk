# Per-parameter analysis jobs. Each reads only the dump columns and rows its L needs; none
# imports torch. Results are tidy Parquet tables, one row per sample (layer, chunk, head).


rule distance:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        results("analysis", "distance", "L{length}_N{n}.parquet"),
    params:
        embedding=ANALYSIS["embedding"],
        mc_draws=ANALYSIS["distance"]["mc_draws"],
        seed=config["seed"],
    log:
        "logs/analysis/distance/L{length}_N{n}.log",
    benchmark:
        "benchmarks/out/analysis/distance/L{length}_N{n}.tsv"
    script:
        "../scripts/analyse_distance.py"


rule critical_n:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        results("analysis", "critical_n", "L{length}.parquet"),
    params:
        embedding=ANALYSIS["embedding"],
        ks_alpha=ANALYSIS["critical_n"]["ks_alpha"],
        mc_draws=ANALYSIS["critical_n"]["mc_draws"],
        seed=config["seed"],
    log:
        "logs/analysis/critical_n/L{length}.log",
    benchmark:
        "benchmarks/out/analysis/critical_n/L{length}.tsv"
    script:
        "../scripts/analyse_critical_n.py"


rule pairwise_separation:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        results("analysis", "separation", "L{length}.parquet"),
    params:
        embedding=ANALYSIS["embedding"],
        radius=ANALYSIS["separability"]["radius"],
    log:
        "logs/analysis/separation/L{length}.log",
    script:
        "../scripts/analyse_separation.py"


rule separability:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
        separation=results("analysis", "separation", "L{length}.parquet"),
    output:
        results("analysis", "separability", "L{length}_N{n}.parquet"),
    params:
        embedding=ANALYSIS["embedding"],
        radius=ANALYSIS["separability"]["radius"],
        delta_over=ANALYSIS["separability"]["delta_over"],
    log:
        "logs/analysis/separability/L{length}_N{n}.log",
    script:
        "../scripts/analyse_separability.py"


rule gradient:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        results("analysis", "gradient", "T{temperature}.parquet"),
    params:
        length=ANALYSIS["gradient"]["length"],
        epsilons=ANALYSIS["gradient"]["epsilons"],
        directions=ANALYSIS["gradient"]["directions"],
        temperature_on=ANALYSIS["gradient"]["temperature_on"],
        seed=config["seed"],
    log:
        "logs/analysis/gradient/T{temperature}.log",
    script:
        "../scripts/analyse_gradient.py"


rule vanishing:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        results("analysis", "vanishing", "L{length}.parquet"),
    log:
        "logs/analysis/vanishing/L{length}.log",
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
    params:
        kind="distance",
    log:
        "logs/summarise/distance.log",
    script:
        "../scripts/summarise.py"


rule summarise_separability:
    input:
        separability=separability_targets(),
    output:
        separability=results("summary", "separability.csv"),
        violations=results("summary", "violations_separability.csv"),
    params:
        kind="separability",
    log:
        "logs/summarise/separability.log",
    script:
        "../scripts/summarise.py"


rule summarise_gradient:
    input:
        gradient=gradient_targets(),
    output:
        gradient=results("summary", "gradient.csv"),
        violations=results("summary", "violations_gradient.csv"),
    params:
        kind="gradient",
    log:
        "logs/summarise/gradient.log",
    script:
        "../scripts/summarise.py"


rule summarise_vanishing:
    input:
        vanishing=per_length_targets("vanishing"),
    output:
        vanishing=results("summary", "vanishing.csv"),
        violations=results("summary", "violations_vanishing.csv"),
    params:
        kind="vanishing",
    log:
        "logs/summarise/vanishing.log",
    script:
        "../scripts/summarise.py"


rule describe_run:
    input:
        dumps=dump_dirs(),
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        results("summary", "run.json"),
    params:
        corpus=CORPUS,
        model=MODEL,
        embedding=ANALYSIS["embedding"],
        query_row=config["extraction"]["query_row"],
    log:
        "logs/summarise/describe_run.log",
    script:
        "../scripts/describe_run.py"
