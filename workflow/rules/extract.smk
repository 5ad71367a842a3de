rule extract_batch:
    input:
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        directory(results("dumps", "batch{batch}")),
    params:
        extraction=config["extraction"],
        lengths=sorted(ANALYSIS["lengths"]),
        store_hidden=ANALYSIS["embedding"] == "hidden",
        chunks_per_batch=config["extraction"]["chunks_per_batch"],
    threads: config["extraction"]["threads"]
    resources:
        mem_mb=config["extraction"]["mem_mb"],
        gpu=1 if config["extraction"]["device"].startswith("cuda") else 0,
    log:
        "logs/extract/batch{batch}.log",
    benchmark:
        "benchmarks/out/extract/batch{batch}.tsv"
    script:
        "../scripts/extract.py"
