rule extract_batch:
    input:
        tokens=rules.chunk_corpus.output.tokens,
        model=model_dir(),
    output:
        directory(results("dumps", "batch{batch}")),
    log:
        "logs/extract/batch{batch}.log",
    benchmark:
        "results/benchmarks/extract/batch{batch}.tsv"
    conda:
        "../envs/attnlimits.yaml"
    threads: config["extraction"]["threads"]
    resources:
        mem_mb=config["extraction"]["mem_mb"],
        gpu=1 if config["extraction"]["device"].startswith("cuda") else 0,
    params:
        extraction=config["extraction"],
        lengths=sorted(ANALYSIS["lengths"]),
        store_hidden=ANALYSIS["embedding"] == "hidden",
        chunks_per_batch=config["extraction"]["chunks_per_batch"],
    script:
        "../scripts/extract.py"
