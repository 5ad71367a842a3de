rule fetch_model:
    output:
        directory(model_dir()),
    params:
        model=config["model"],
        seed=config["seed"],
    log:
        f"logs/fetch_model/{MODEL}.log",
    script:
        "../scripts/fetch_model.py"
