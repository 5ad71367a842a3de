# The normalizer study (docs/study.md): small Llama models trained on the corpus, identical but for
# their attention normalizer; each then goes through extraction and its own normalizer job like
# any model (results/study-<normalizer>-seed<seed>/, one per seed of study.seeds), and
# study_report answers "which rule relaxes which
# limit". Not part of `all`: `snakemake --cores 2 study`.


rule train_tokenizer:
    input:
        corpus=corpus_file(CORPUS),
    output:
        results("study", "tokenizer.json"),
    log:
        "logs/study/train_tokenizer.log",
    conda:
        "../envs/analysis.yaml"
    params:
        tokenizer=config["study"]["tokenizer"],
    script:
        "../scripts/train_tokenizer.py"


rule train_model:
    input:
        corpus=corpus_file(CORPUS),
        tokenizer=rules.train_tokenizer.output[0],
    output:
        model=directory(model_dir()),
        history=results("{model}", "training", "history.csv"),
        timing=results("{model}", "training", "timing.json"),
    log:
        "logs/{model}/train_model.log",
    benchmark:
        results("{model}", "benchmarks", "train_model.tsv")
    wildcard_constraints:
        model=name_pattern(STUDY_MODELS),
    conda:
        "../envs/model.yaml"
    threads: config["study"]["training"]["threads"]
    params:
        rule=study_rule,
        architecture=config["study"]["architecture"],
        training=training_of,
        # the model's own study seed (study-<name>-seed<seed>): another seed's list leaves it be
        seed=lambda wildcards: MODELS[wildcards.model]["model"]["study_seed"],
    script:
        "../scripts/train_model.py"


rule evaluate_model:
    input:
        corpus=corpus_file(CORPUS),
        model=model_dir(),
    output:
        results("{model}", "training", "evaluation.json"),
    log:
        "logs/{model}/evaluate_model.log",
    wildcard_constraints:
        model=name_pattern(STUDY_MODELS),
    conda:
        "../envs/model.yaml"
    threads: config["study"]["training"]["threads"]
    params:
        evaluation=config["study"]["evaluation"],
        validation_fraction=config["study"]["training"]["validation_fraction"],
    script:
        "../scripts/evaluate_model.py"


rule study_effective_windows:
    input:
        corpus=corpus_file(CORPUS),
        model=model_dir(),
    output:
        tokens=results("{model}", "effective_set", "tokens.parquet"),
        text=results("{model}", "effective_set", "windows.txt"),
    log:
        "logs/{model}/study/effective_windows.log",
    wildcard_constraints:
        model=name_pattern(STUDY_MODELS),
    conda:
        "../envs/model.yaml"
    params:
        # the held-out text's first windows of the longest context (N*'s L are their suffixes)
        chunking=lambda wildcards: {
            "chunk_length": max(config["study"]["evaluation"]["contexts"]),
            "n_chunks": config["study"]["effective_set"]["windows"],
            "first_chunk": 0,
            "special_tokens": "none",
        },
    script:
        "../scripts/chunk_corpus.py"


rule study_gradient:
    input:
        pack=pack_at("gradient"),
        model=model_dir(),
    output:
        results("{model}", "study", "gradient.parquet"),
    log:
        "logs/{model}/study/gradient.log",
    benchmark:
        results("{model}", "benchmarks", "study", "gradient.tsv")
    wildcard_constraints:
        model=name_pattern(STUDY_MODELS),
    conda:
        "../envs/model.yaml"
    params:
        rule=study_rule,
        entry=lambda wildcards: MODELS[wildcards.model]["beyond"]["normalizers"][
            MODELS[wildcards.model]["model"]["trained"]
        ],
        temperatures=model_setting("analysis", "gradient", "temperatures"),
        max_samples=model_setting("beyond", "max_samples"),
        seed=config["seed"],
    script:
        "../scripts/analyse_study_gradient.py"


rule study_report:
    input:
        style=STYLE,
        template=workflow.source_path("../resources/study_template.md"),
        histories=[results(m, "training", "history.csv") for m in STUDY_MODELS],
        timings=[results(m, "training", "timing.json") for m in STUDY_MODELS],
        evaluations=[results(m, "training", "evaluation.json") for m in STUDY_MODELS],
        models=[model_dir(m) for m in STUDY_MODELS],
        samples=study_inputs("samples"),
        critical_n=study_inputs("critical_n"),
        separability=study_inputs("separability"),
        gradient=[results(m, "study", "gradient.parquet") for m in STUDY_MODELS],
        # the trained models' own (the page shows the first seed's; untrained models need none)
        coverage=[results(m, "beyond", "coverage.parquet") for m in TRAINED_MODELS],
        heads=[results(m, "beyond", "heads.parquet") for m in TRAINED_MODELS],
        effective_set=[t for m in TRAINED_MODELS for t in effective_set_tables_of(m)],
    output:
        csv="tables/study/normalizer_limits.csv",
        md="tables/study/normalizer_limits.md",
        seeds_csv="tables/study/normalizer_limits_seeds.csv",
        per_seed_csv="tables/study/normalizer_limits_per_seed.csv",
        pdf="figures/study/normalizer_limits.pdf",
        png="figures/study/normalizer_limits.png",
        effective_set="tables/study/effective_set.csv",
        effective_set_per_seed="tables/study/effective_set_per_seed.csv",
        page="docs/study.md",
        figures=directory("docs/study"),
    log:
        "logs/study/study_report.log",
    conda:
        "../envs/analysis.yaml"
    params:
        models=STUDY_MODELS,
        trained={m: MODELS[m]["model"]["trained"] for m in STUDY_MODELS},
        seeds={m: MODELS[m]["model"]["study_seed"] for m in STUDY_MODELS},
        untrained={m: MODELS[m]["model"]["untrained"] for m in STUDY_MODELS},
        study=config["study"],
        seed=config["seed"],
        n_fixed={m: MODELS[m]["analysis"]["distance"]["n_fixed"] for m in STUDY_MODELS},
        embedding={m: MODELS[m]["analysis"]["embedding"] for m in STUDY_MODELS},
        n_heads={m: MODELS[m]["beyond"]["n"] for m in STUDY_MODELS},
        ns_ratio_threshold={
            m: MODELS[m]["beyond"]["ns_ratio_threshold"] for m in STUDY_MODELS
        },
        command="snakemake --cores 2 study",
        effective_set={m: MODELS[m]["effective_set"] for m in STUDY_MODELS},
        bootstrap={m: MODELS[m]["analysis"]["bootstrap"] for m in STUDY_MODELS},
    script:
        "../scripts/make_study.py"


rule study:
    input:
        rules.study_report.output,
        study_model_reports(),
