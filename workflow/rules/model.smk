rule fetch_model:
    output:
        directory(model_dir()),
    log:
        f"logs/fetch_model/{MODEL}.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        model=config["model"],
        seed=config["seed"],
    script:
        "../scripts/fetch_model.py"
