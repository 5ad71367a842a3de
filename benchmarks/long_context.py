"""Long contexts: extraction and the O(L^2) analysis against the forward pass, at L up to 8192.

A fetched model folder (default: SmolLM2-135M from config/smollm2.yaml, resources/models/
smollm2-135m) or, with --random, the same architecture with seeded random weights. Each method
runs in its own subprocess so that its peak resident memory is its own; all are measured in one
invocation and printed as one table, with the ratio to the bare forward pass at the same L:

  floor       bare forward pass (SDPA), nothing kept
  capture     forward through the capture: q, k, v of every layer and the analysed rows
  extract     capture + the Parquet dump of one chunk (what an extraction job does per chunk)
  delta       min pairwise distance (Theorem 2's delta, blockwise) of the value vectors of one
              layer's query heads at that L (one separability job does this for every layer)

Usage: python benchmarks/long_context.py [--model DIR | --random] [--lengths 1024 4096 8192]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = {
    "model_type": "llama",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "max_position_embeddings": 8192,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
}


def load(model_dir: str | None):
    import torch
    from transformers import AutoConfig, AutoModel

    from attnlimits.extraction import register_capture

    if model_dir:
        return AutoModel.from_pretrained(model_dir, attn_implementation=register_capture()).eval()
    torch.manual_seed(0)
    config = AutoConfig.for_model(**SMOLLM2)
    return AutoModel.from_config(config, attn_implementation=register_capture()).eval()


def run_one(method: str, length: int, model_dir: str | None) -> dict:
    import numpy as np
    import torch

    from attnlimits.extraction import extract_chunk
    from attnlimits.separability import min_pairwise_distance

    model = load(model_dir)
    ids = torch.as_tensor(np.random.default_rng(0).integers(0, 49152, length))
    lengths = [L for L in (64, 256, 1024, 4096, 8192) if L <= length]
    if method == "floor":
        model.set_attn_implementation("sdpa")

        def step():
            with torch.inference_mode():
                model(ids[None], use_cache=False)

    elif method == "capture":

        def step():
            list(extract_chunk(model, ids, lengths))

    elif method == "extract":
        from attnlimits_workflow.dumps.write import write_batch

        def step():
            out = Path(tempfile.mkdtemp())
            write_batch(
                out,
                model,
                {0: ids.numpy()},
                lengths,
                query_row="last",
                store_hidden=False,
                provenance={},
                extra_metadata={},
                vectors=("k", "v"),
            )

    elif method == "delta":
        cap = next(iter(extract_chunk(model, ids, [length])))
        heads = cap.v[[h // 3 for h in range(9)]].numpy()  # value vectors per query head

        def step():
            min_pairwise_distance(heads)

    else:
        raise ValueError(method)
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "resources/models/smollm2-135m"))
    parser.add_argument("--random", action="store_true", help="random weights, no model folder")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    model_dir = None if args.random else args.model
    if args.one:
        print(json.dumps(run_one(args.one[0], int(args.one[1]), model_dir)))
        return
    if model_dir and not (Path(model_dir) / "config.json").exists():
        sys.exit(f"{model_dir}: no model folder; fetch it (config/smollm2.yaml) or pass --random")
    print(f"model: {model_dir or 'SmolLM2-135M architecture, random weights'}")
    print(f"{'L':>6} {'method':<8} {'seconds':>9} {'x floor':>8} {'peak MB':>8}")
    for length in args.lengths:
        floor = None
        for method in ("floor", "capture", "extract", "delta"):
            cmd = [sys.executable, __file__, "--one", method, str(length)]
            cmd += ["--random"] if args.random else ["--model", model_dir]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            floor = floor or result["seconds"]
            print(
                f"{length:>6} {method:<8} {result['seconds']:>9.2f} "
                f"{result['seconds'] / floor:>8.2f} {result['peak_mb']:>8.0f}"
            )


if __name__ == "__main__":
    main()
