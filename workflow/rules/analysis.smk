# Per-parameter analysis jobs; none imports torch. Every analysis reads a per-L sample pack:
# the dumps decoded once into .npy arrays that each job memory-maps (gradient and vanishing map
# only the small logits/weights/norms arrays, so decoding Parquet per job is avoided). Packs are
# kept (not temp): rebuilding one for a new job would mark every other job of its L as
# "updated by another job" and rerun it. Results are tidy Parquet tables, one row per sample
# (layer, chunk, head).


rule pack_samples:
    input:
        dumps=dump_dirs,
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        directory(results("{model}", "samples", "L{length}")),
    log:
        "logs/{model}/analysis/pack/L{length}.log",
    benchmark:
        results("{model}", "benchmarks", "analysis", "pack", "L{length}.tsv")
    priority: 3
    conda:
        "../envs/analysis.yaml"
    params:
        embedding=model_setting("analysis", "embedding"),
        # the x of every other embedding analysis.readings names: one pack serves them all
        extra_embeddings=extra_embeddings,
        row_chunks=row_chunks_of,
    script:
        "../scripts/pack_samples.py"


rule distance:
    input:
        pack=pack_of,
    output:
        results("{model}", "analysis", "distance", "L{length}_N{n}.parquet"),
    log:
        "logs/{model}/analysis/distance/L{length}_N{n}.log",
    benchmark:
        results("{model}", "benchmarks", "analysis", "distance", "L{length}_N{n}.tsv")
    wildcard_constraints:
        model=name_pattern(LAST_ROW_MODELS),
    conda:
        "../envs/analysis.yaml"
    resources:
        gpu=analysis_gpus,
    params:
        embedding=model_setting("analysis", "embedding"),
        mc_draws=model_setting("analysis", "distance", "mc_draws"),
        mc_strata=model_setting("analysis", "distance", "mc_strata"),
        mc_max_draws=model_setting("analysis", "distance", "mc_max_draws"),
        mc_target_rel_stderr=model_setting(
            "analysis", "distance", "mc_target_rel_stderr"
        ),
        seed=config["seed"],
        protocol=model_setting("analysis", "protocol"),
        all_rows=model_setting("analysis", "all_rows"),
        n_fixed=model_setting("analysis", "distance", "n_fixed"),
        zero_weight=model_setting("analysis", "zero_weight"),
    script:
        "../scripts/analyse_distance.py"


rule pairwise_separation:
    input:
        pack=pack_of,
    output:
        results("{model}", "analysis", "separation", "L{length}.parquet"),
    log:
        "logs/{model}/analysis/separation/L{length}.log",
    benchmark:
        results("{model}", "benchmarks", "analysis", "separation", "L{length}.tsv")
    priority: 2
    conda:
        "../envs/analysis.yaml"
    params:
        embedding=model_setting("analysis", "embedding"),
        radius=model_setting("analysis", "separability", "radius"),
    script:
        "../scripts/analyse_separation.py"


rule separability:
    input:
        pack=pack_of,
        separation=results("{model}", "analysis", "separation", "L{length}.parquet"),
    output:
        results("{model}", "analysis", "separability", "L{length}_N{n}.parquet"),
    log:
        "logs/{model}/analysis/separability/L{length}_N{n}.log",
    benchmark:
        results(
            "{model}", "benchmarks", "analysis", "separability", "L{length}_N{n}.tsv"
        )
    wildcard_constraints:
        model=name_pattern(LAST_ROW_MODELS),
    conda:
        "../envs/analysis.yaml"
    resources:
        gpu=analysis_gpus,
    params:
        embedding=model_setting("analysis", "embedding"),
        radius=model_setting("analysis", "separability", "radius"),
        delta_over=model_setting("analysis", "separability", "delta_over"),
        protocol=model_setting("analysis", "protocol"),
        all_rows=model_setting("analysis", "all_rows"),
        zero_weight=model_setting("analysis", "zero_weight"),
        seed=config["seed"],
    script:
        "../scripts/analyse_separability.py"


rule gradient:
    input:
        pack=pack_at("gradient"),
    output:
        results("{model}", "analysis", "gradient", "T{temperature}.parquet"),
    log:
        "logs/{model}/analysis/gradient/T{temperature}.log",
    benchmark:
        results("{model}", "benchmarks", "analysis", "gradient", "T{temperature}.tsv")
    wildcard_constraints:
        model=name_pattern(LAST_ROW_MODELS),
    conda:
        "../envs/analysis.yaml"
    resources:
        gpu=analysis_gpus,
    params:
        epsilons=model_setting("analysis", "gradient", "epsilons"),
        directions=model_setting("analysis", "gradient", "directions"),
        null_rows=model_setting("analysis", "gradient", "null_rows"),
        temperature_on=model_setting("analysis", "gradient", "temperature_on"),
        seed=config["seed"],
        protocol=model_setting("analysis", "protocol"),
        all_rows=model_setting("analysis", "all_rows"),
    script:
        "../scripts/analyse_gradient.py"


# The paper's protocol: every row analysis at L in one pass over each head's rows
# (attnlimits_workflow.engine), split by layer into analysis.all_rows.jobs_per_length jobs that
# run side by side (rows_part), whose per-head sums rule rows pools into each analysis's tables;
# the rules after it take each table out of its folder (a cp, local: a Python job would re-read
# the workflow, seconds each), so every (L, N) and T table stays a target of its own. The params hold only the settings of the analyses that run at L: a
# setting no analysis there reads reruns nothing.
rule rows_part:
    input:
        pack=pack_of,
        separation=separation_at,
    output:
        results("{model}", "row_parts", "L{length}", "part{part}.npz"),
    log:
        "logs/{model}/analysis/rows/L{length}_part{part}.log",
    benchmark:
        results("{model}", "benchmarks", "analysis", "rows", "L{length}_part{part}.tsv")
    wildcard_constraints:
        model=name_pattern(ROW_ENGINE_MODELS),
        part=r"\d+",
    priority: 2
    conda:
        "../envs/analysis.yaml"
    resources:
        gpu=analysis_gpus,
    params:
        plan=engine_part_plan,
        parts=model_setting("analysis", "all_rows", "jobs_per_length"),
        embedding=model_setting("analysis", "embedding"),
    script:
        "../scripts/analyse_rows_part.py"


rule rows:
    input:
        pack=pack_of,
        parts=row_parts,
    output:
        directory(results("{model}", "rows", "L{length}")),
    log:
        "logs/{model}/analysis/rows/L{length}.log",
    benchmark:
        results("{model}", "benchmarks", "analysis", "rows", "L{length}.tsv")
    wildcard_constraints:
        model=name_pattern(ROW_ENGINE_MODELS),
    conda:
        "../envs/analysis.yaml"
    params:
        plan=engine_plan,
        embedding=model_setting("analysis", "embedding"),
    script:
        "../scripts/analyse_rows.py"


rule distance_from_rows:
    input:
        rows=results("{model}", "rows", "L{length}"),
    output:
        results("{model}", "analysis", "distance", "L{length}_N{n}.parquet"),
    log:
        "logs/{model}/analysis/distance/L{length}_N{n}.log",
    wildcard_constraints:
        model=name_pattern(ROW_ENGINE_MODELS),
    localrule: True
    conda:
        "../envs/analysis.yaml"
    shell:
        "cp {input.rows}/distance_N{wildcards.n}.parquet {output} 2> {log}"


rule separability_from_rows:
    input:
        rows=results("{model}", "rows", "L{length}"),
    output:
        results("{model}", "analysis", "separability", "L{length}_N{n}.parquet"),
    log:
        "logs/{model}/analysis/separability/L{length}_N{n}.log",
    wildcard_constraints:
        model=name_pattern(ROW_ENGINE_MODELS),
    localrule: True
    conda:
        "../envs/analysis.yaml"
    shell:
        "cp {input.rows}/separability_N{wildcards.n}.parquet {output} 2> {log}"


rule gradient_from_rows:
    input:
        rows=rows_at("gradient"),
    output:
        results("{model}", "analysis", "gradient", "T{temperature}.parquet"),
    log:
        "logs/{model}/analysis/gradient/T{temperature}.log",
    wildcard_constraints:
        model=name_pattern(ROW_ENGINE_MODELS),
    localrule: True
    conda:
        "../envs/analysis.yaml"
    shell:
        "cp {input.rows}/gradient_T{wildcards.temperature}.parquet {output} 2> {log}"


rule summarise_distance:
    input:
        distance=distance_targets,
        critical_n=per_length_targets("critical_n"),
    output:
        distance=results("{model}", "summary", "distance.csv"),
        critical_n=results("{model}", "summary", "critical_n.csv"),
        critical_n_replicates=results(
            "{model}", "summary", "critical_n_replicates.parquet"
        ),
        violations=results("{model}", "summary", "violations_distance.csv"),
        replicates=results("{model}", "summary", "distance_replicates.parquet"),
    log:
        "logs/{model}/summarise/distance.log",
    benchmark:
        results("{model}", "benchmarks", "summarise", "distance.tsv")
    conda:
        "../envs/analysis.yaml"
    params:
        kind="distance",
        bootstrap=model_setting("analysis", "bootstrap"),
    script:
        "../scripts/summarise.py"


rule summarise_separability:
    input:
        separability=separability_targets,
    output:
        separability=results("{model}", "summary", "separability.csv"),
        violations=results("{model}", "summary", "violations_separability.csv"),
        replicates=results("{model}", "summary", "separability_replicates.parquet"),
    log:
        "logs/{model}/summarise/separability.log",
    benchmark:
        results("{model}", "benchmarks", "summarise", "separability.tsv")
    conda:
        "../envs/analysis.yaml"
    params:
        kind="separability",
        bootstrap=model_setting("analysis", "bootstrap"),
    script:
        "../scripts/summarise.py"


rule summarise_gradient:
    input:
        gradient=gradient_targets,
    output:
        gradient=results("{model}", "summary", "gradient.csv"),
        violations=results("{model}", "summary", "violations_gradient.csv"),
        replicates=results("{model}", "summary", "gradient_replicates.parquet"),
    log:
        "logs/{model}/summarise/gradient.log",
    benchmark:
        results("{model}", "benchmarks", "summarise", "gradient.tsv")
    conda:
        "../envs/analysis.yaml"
    params:
        kind="gradient",
        bootstrap=model_setting("analysis", "bootstrap"),
    script:
        "../scripts/summarise.py"


# The registered analyses (attnlimits_workflow.registry): each with per_length served by the
# generic rules below (and its figure by analysis_figure in figures.smk) through its module
# attnlimits_workflow.analyses.<name> (analyses/generic.py names its entry points): no script,
# rule or caption file of its own, and no list here.


rule analyse:
    input:
        pack=pack_of,
    output:
        results("{model}", "analysis", "{analysis}", "L{length}.parquet"),
    log:
        "logs/{model}/analysis/{analysis}/L{length}.log",
    benchmark:
        results("{model}", "benchmarks", "analysis", "{analysis}", "L{length}.tsv")
    wildcard_constraints:
        analysis=name_pattern(PER_LENGTH),
    # critical_n's jobs are the longest per L: started early
    priority: 2
    conda:
        "../envs/analysis.yaml"
    resources:
        gpu=analysis_gpus,
    params:
        analysis=lambda wildcards: wildcards.analysis,
        settings=analysis_settings,
    script:
        "../scripts/analyse.py"


rule summarise_analysis:
    input:
        tables=lambda wildcards: per_length_targets(wildcards.analysis)(wildcards),
    output:
        summary=results("{model}", "summary", "{analysis}.csv"),
        violations=results("{model}", "summary", "violations_{analysis}.csv"),
        replicates=results("{model}", "summary", "{analysis}_replicates.parquet"),
    log:
        "logs/{model}/summarise/{analysis}.log",
    benchmark:
        results("{model}", "benchmarks", "summarise", "{analysis}.tsv")
    wildcard_constraints:
        analysis=name_pattern(GENERIC_SUMMARIES),
    conda:
        "../envs/analysis.yaml"
    params:
        analysis=lambda wildcards: wildcards.analysis,
        bootstrap=model_setting("analysis", "bootstrap"),
    script:
        "../scripts/summarise_analysis.py"


rule describe_run:
    input:
        dumps=dump_dirs,
        tokens=source_tokens,
        model=source_model_dir,
    output:
        results("{model}", "summary", "run.json"),
    log:
        "logs/{model}/summarise/describe_run.log",
    benchmark:
        results("{model}", "benchmarks", "summarise", "describe_run.tsv")
    conda:
        "../envs/analysis.yaml"
    params:
        corpus=model_setting("corpus", "name"),
        model=lambda wildcards: wildcards.model,
        embedding=model_setting("analysis", "embedding"),
        query_row=model_setting("extraction", "query_row"),
        protocol=model_setting("analysis", "protocol"),
        masked=model_setting("analysis", "all_rows", "masked"),
        all_rows_chunks=model_setting("analysis", "all_rows", "chunks"),
        all_rows_rows=model_setting("analysis", "all_rows", "rows"),
    script:
        "../scripts/describe_run.py"


# A registered analysis the row engine serves (critical_n): under the paper's protocol its table
# at L comes from rule rows' folder, under last_row from rule analyse.
rule analysis_from_rows:
    input:
        rows=results("{model}", "rows", "L{length}"),
    output:
        results("{model}", "analysis", "{analysis}", "L{length}.parquet"),
    log:
        "logs/{model}/analysis/{analysis}/L{length}.log",
    wildcard_constraints:
        model=name_pattern(ROW_ENGINE_MODELS),
        analysis=name_pattern([a for a in PER_LENGTH if a in ROW_ANALYSES]),
    localrule: True
    conda:
        "../envs/analysis.yaml"
    shell:
        "cp {input.rows}/{wildcards.analysis}.parquet {output} 2> {log}"


ruleorder: analysis_from_rows > analyse
