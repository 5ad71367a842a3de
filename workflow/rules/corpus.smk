rule download_corpus:
    output:
        f"resources/corpus/{CORPUS}.txt",
    log:
        f"logs/download_corpus/{CORPUS}.log",
    conda:
        "../envs/analysis.yaml"
    params:
        corpus=config["corpus"],
    script:
        "../scripts/download_corpus.py"


# Each model reads the corpus with its own tokenizer.
rule chunk_corpus:
    input:
        corpus=rules.download_corpus.output[0],
        model=model_dir(),
    output:
        tokens=results("{model}", "chunks", "tokens.parquet"),
        text=results("{model}", "chunks", "chunks.txt"),
    log:
        "logs/{model}/chunk_corpus.log",
    conda:
        "../envs/model.yaml"
    params:
        chunking=model_setting("chunking"),
    script:
        "../scripts/chunk_corpus.py"
