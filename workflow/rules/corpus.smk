rule download_corpus:
    output:
        f"resources/corpus/{CORPUS}.txt",
    params:
        corpus=config["corpus"],
    log:
        f"logs/download_corpus/{CORPUS}.log",
    script:
        "../scripts/download_corpus.py"


rule chunk_corpus:
    input:
        corpus=rules.download_corpus.output[0],
        model=model_dir(),
    output:
        tokens=results("chunks", "tokens.parquet"),
        text=results("chunks", "chunks.txt"),
    params:
        chunking=config["chunking"],
    log:
        "logs/chunk_corpus.log",
    script:
        "../scripts/chunk_corpus.py"
