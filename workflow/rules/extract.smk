rule extract_batch:
    input:
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        directory(results("{model}", "dumps", "batch{batch}")),
    log:
        "logs/{model}/extract/batch{batch}.log",
    benchmark:
        results("{model}", "benchmarks", "extract", "batch{batch}.tsv")
    conda:
        "../envs/model.yaml"
    threads: lambda wildcards: MODELS[wildcards.model]["extraction"]["threads"]
    resources:
        mem_mb=lambda wildcards: MODELS[wildcards.model]["extraction"]["mem_mb"],
        gpu=lambda wildcards: int(
            MODELS[wildcards.model]["extraction"]["device"].startswith("cuda")
        ),
    params:
        extraction=model_setting("extraction"),
        lengths=lambda wildcards: sorted(analysis_of(wildcards)["lengths"]),
        # the d_model-wide embeddings are stored only when analysis.embedding or one of
        # analysis.readings names them
        store_hidden=lambda wildcards: "hidden" in embeddings_of(wildcards.model),
        store_attention_input=lambda wildcards: "attention_input"
        in embeddings_of(wildcards.model),
        chunks_per_batch=model_setting("extraction", "chunks_per_batch"),
    script:
        "../scripts/extract.py"
