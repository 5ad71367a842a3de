rule download_corpus:
    output:
        corpus_file("{corpus}"),
    log:
        "logs/download_corpus/{corpus}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        corpus=lambda wildcards: CORPORA[wildcards.corpus],
    script:
        "../scripts/download_corpus.py"


# Each model reads the corpus with its own tokenizer. A checkpoint: with chunking.n_chunks:
# auto, the extraction jobs are planned from the chunks it cut (common.smk's n_batches).
checkpoint chunk_corpus:
    input:
        corpus=model_corpus,
        model=model_dir(),
    output:
        tokens=results("{model}", "chunks", "tokens.parquet"),
        text=results("{model}", "chunks", "chunks.txt"),
    log:
        "logs/{model}/chunk_corpus.log",
    conda:
        "../envs/model.yaml"
    params:
        chunking=chunking_params,
    script:
        "../scripts/chunk_corpus.py"
