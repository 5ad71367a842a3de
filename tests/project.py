"""The tiny, self-contained workflow project of the end-to-end tests: the configurations of the
.test matrix (.test/config-*/config.yaml), which CI runs too, with their data (a synthetic
Gutenberg-style text, a byte-level BPE tokenizer trained on it, GPT-2 and Llama configs small
enough to run in seconds) copied into the test's own folder. ``synthetic_text`` and
``tiny_model_folder`` are how .test/data was made (tests/test_tiny_configs.py holds them equal)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import yaml

from attnlimits_workflow.runner import snakemake_command

REPO = Path(__file__).resolve().parents[1]
TEST = REPO / ".test"
# tiny_config's architectures: the .test configuration each reads
TINY_CONFIGS = {"gpt2": "config-last-row", "llama": "config-llama"}

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
    """The .test configuration of ``architecture`` (TINY_CONFIGS), its corpus and model folder
    copied into ``tmp`` (as corpus.txt and tiny-<architecture>-src, which tests may damage or
    replace) and named by absolute paths; ``overrides`` set dotted keys."""
    cfg = yaml.safe_load((TEST / TINY_CONFIGS[architecture] / "config.yaml").read_text())
    tmp.mkdir(parents=True, exist_ok=True)
    corpus = tmp / "corpus.txt"
    shutil.copyfile(TEST / cfg["corpus"]["path"], corpus)
    model = tmp / f"tiny-{architecture}-src"
    shutil.copytree(TEST / cfg["model"]["path"], model, dirs_exist_ok=True)
    cfg["corpus"]["path"], cfg["model"]["path"] = str(corpus), str(model)
    # N*'s search is CI's .test run's and tests/test_hostile.py's to plan; the other runs of the
    # tiny project leave it out (its jobs would add about 20 s to each)
    if "effective_set" in cfg:
        cfg["effective_set"] = {**cfg["effective_set"], "enabled": False}
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
