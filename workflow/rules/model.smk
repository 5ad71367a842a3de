rule fetch_model:
    output:
        directory(model_dir()),
    log:
        "logs/{model}/fetch_model.log",
    wildcard_constraints:
        model=name_pattern(PAPER_MODELS),
    conda:
        "../envs/model.yaml"
    params:
        model=model_setting("model"),
        seed=config["seed"],
    script:
        "../scripts/fetch_model.py"
