"""A tiny, self-contained workflow project for end-to-end tests: a synthetic Gutenberg-style
text, a byte-level BPE tokenizer trained on it, and a GPT-2 config small enough to run in seconds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import yaml

from attnlimits_workflow.runner import snakemake_command

REPO = Path(__file__).resolve().parents[1]

WORDS = (
    "prince andrew pierre natasha moscow war peace the a of and to in was he she his her that it with "
    "for on at as by but not from had have they said all one would there been were which who when"
).split()


def synthetic_text(n_words: int = 6000, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    words = rng.choice(WORDS, size=n_words)
    body = " ".join(words)
    return (
        "The Project Gutenberg eBook of Test\n\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK TEST ***\n"
        f"{body}\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK TEST ***\n"
        "Licence text.\n"
    )


def tiny_model_folder(
    path: Path, text: str, vocab_size: int = 300, architecture: str = "gpt2"
) -> Path:
    """config.json + a GPT-2 style tokenizer trained on ``text`` (no weights: random_init).

    ``architecture`` "llama": a 2-layer Llama with RoPE and grouped-query attention (4 query heads
    sharing 2 KV heads) instead of GPT-2.
    """
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2TokenizerFast, LlamaConfig

    path.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        [text], vocab_size=vocab_size, min_frequency=1, special_tokens=["<|endoftext|>"]
    )
    bpe.save_model(str(path))
    tok = GPT2TokenizerFast(
        tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    )
    tok.save_pretrained(path)
    if architecture == "llama":
        cfg = LlamaConfig(
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            vocab_size=len(tok),
            bos_token_id=0,
            eos_token_id=0,
        )
    else:
        cfg = GPT2Config(
            n_layer=2,
            n_head=2,
            n_embd=16,
            n_positions=64,
            vocab_size=len(tok),
            bos_token_id=0,
            eos_token_id=0,
        )
    cfg.save_pretrained(path)
    return path


def tiny_config(tmp: Path, architecture: str = "gpt2", **overrides) -> dict:
    text = synthetic_text()
    corpus = tmp / "corpus.txt"
    corpus.write_text(text)
    model = tiny_model_folder(tmp / f"tiny-{architecture}-src", text, architecture=architecture)
    cfg = {
        "seed": 7,
        "corpus": {"name": "synthetic", "path": str(corpus)},
        "model": {"name": f"tiny-{architecture}", "path": str(model), "random_init": True},
        "chunking": {"chunk_length": 64, "n_chunks": 4},
        "extraction": {"chunks_per_batch": 2, "threads": 1, "mem_mb": 1000},
        "analysis": {
            # The workflow mechanics are tested on the last-row protocol (one sample per (layer,
            # chunk, head)); test_workflow_e2e runs the default all-rows protocol on its own.
            "protocol": "last_row",
            "lengths": [8, 16, 32, 64],
            "distance": {"n_fixed": 2, "length_fixed": 64, "n_grid": [1, 4, 20, 30], "mc_draws": 8},
            "critical_n": {"mc_draws": 4},
            "separability": {"length": 64, "n_grid": [1, 4, 16]},
            "gradient": {
                "length": 64,
                "temperatures": [0.01, 0.03, 0.1, 1.0, 10.0],
                "directions": 4,
            },
        },
    }
    for key, value in overrides.items():
        node = cfg
        *head, last = key.split(".")
        for k in head:
            node = node.setdefault(k, {})
        node[last] = value
    return cfg


def write_config(tmp: Path, cfg: dict) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def snakemake(
    workdir: Path, config: Path, *args: str, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run the workflow of this repository in ``workdir`` with ``config`` overlaid on the defaults."""
    cmd = snakemake_command(REPO / "Snakefile", workdir, config, *args)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
        )
    return proc


def planned_rules(workdir: Path, config: Path, *targets: str) -> list[str]:
    """Rules a dry run would execute (one entry per job)."""
    proc = snakemake(workdir, config, *targets, "-n", "--quiet", "rules")
    rules = []
    started = False
    for line in (proc.stdout + proc.stderr).splitlines():
        parts = line.split()
        if (
            parts[:1] == ["job"]
            and parts[1:2] == ["count"]
            or (len(parts) == 1 and parts[0] == "count")
        ):
            started = True
            continue
        if started and parts[:1] == ["total"]:
            break
        if started and len(parts) == 2 and parts[1].isdigit() and parts[0] != "job":
            rules += [parts[0]] * int(parts[1])
    return rules


def planned_outputs(workdir: Path, config: Path, *targets: str) -> list[str]:
    """Output files of every job a dry run would execute."""
    proc = snakemake(workdir, config, *targets, "-n")
    outputs = []
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.strip().startswith("output:"):
            outputs += [p.strip() for p in line.split(":", 1)[1].split(",")]
    return outputs


def assert_same_outputs(a: Path, b: Path) -> None:
    """Two runs of the tiny project produced the same results: every analysis and beyond-the-paper
    table, every summary CSV and the final tables."""
    import polars as pl

    compared = 0
    for sub in ("analysis", "beyond"):
        for left in sorted((a / "results").glob(f"*/{sub}/**/*.parquet")):
            right = b / left.relative_to(a)
            assert pl.read_parquet(left).equals(pl.read_parquet(right)), left
            compared += 1
    for left in sorted((a / "results").glob("*/summary/*.csv")):
        assert left.read_text() == (b / left.relative_to(a)).read_text(), left
    for left in sorted((a / "tables").rglob("*.csv")):
        assert left.read_text() == (b / left.relative_to(a)).read_text(), left
    assert compared > 10
