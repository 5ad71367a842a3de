rule fetch_model:
    output:
        directory(model_dir()),
    log:
        "logs/{model}/fetch_model.log",
    conda:
        "../envs/attnlimits.yaml"
    params:
        model=model_setting("model"),
        seed=config["seed"],
    script:
        "../scripts/fetch_model.py"
