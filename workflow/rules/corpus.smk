rule download_corpus:
    output:
        f"resources/corpus/{CORPUS}.txt",
    log:
        f"logs/download_corpus/{CORPUS}.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        corpus=config["corpus"],
    script:
        "../scripts/download_corpus.py"


rule chunk_corpus:
    input:
        corpus=rules.download_corpus.output[0],
        model=model_dir(),
    output:
        tokens=results("chunks", "tokens.parquet"),
        text=results("chunks", "chunks.txt"),
    log:
        "logs/chunk_corpus.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        chunking=config["chunking"],
    script:
        "../scripts/chunk_corpus.py"
