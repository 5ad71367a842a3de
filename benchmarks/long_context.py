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

--all-rows CORPUS: the paper's all-rows protocol (config/smollm2-all-rows.yaml: every query row of
every head, L = 64 .. 8192) run by the workflow itself on the first --layers layers of the model
(a folder holding only those layers' weights: a layer's attention depends on the layers below it
alone, so its rows are the full model's), then each analysis stage's job seconds and peak memory
from Snakemake's benchmark files, per L, and scaled by (the model's layers) / --layers to the
whole model, beside the bare forward pass of the whole model at the largest L. Scaling by heads
is exact for every stage but the critical N, whose search length depends on the heads' data.

--direct RUN: the same analysis jobs without Snakemake, in one process, on --device (numpy, cpu,
cuda): for a GPU machine that has no Snakemake. RUN holds a run's dumps (results/<run>/dumps;
packed first, timed) or packs, and --settings the model's resolved analysis section (written here
by --write-settings, which needs the config check's jsonschema). Each job is the one named by a
table of --reference (an earlier run's results/<run>/analysis), whose values it is held against:
the largest relative difference per job is printed beside its seconds, and --out gets both.
With --rows R (analysis.all_rows.rows: R query rows drawn per head), each sampled table is held
against the exact reference through its stated errors instead: the share of (head, statistic)
values whose exact value lies within 1.96 standard errors, the largest |z|, the median error.
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
from types import SimpleNamespace

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
# Llama-3-8B's architecture (issue 45's large model), for --random --architecture llama3-8b:
# its layers' shapes, cut to --arch-layers layers (a layer's cost does not depend on the others)
LLAMA3_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 32768,
    "rope_theta": 500000.0,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
}
ARCHITECTURES = {"smollm2": SMOLLM2, "llama3-8b": LLAMA3_8B}


def load(model_dir: str | None, architecture: str = "smollm2", layers: int | None = None):
    import torch
    from transformers import AutoConfig, AutoModel

    from attnlimits.extraction import register_capture

    if model_dir:
        return AutoModel.from_pretrained(model_dir, attn_implementation=register_capture()).eval()
    torch.manual_seed(0)
    shape = dict(ARCHITECTURES[architecture])
    if layers:
        shape["num_hidden_layers"] = layers
    config = AutoConfig.for_model(**shape)
    return AutoModel.from_config(config, attn_implementation=register_capture()).eval()


def run_one(
    method: str,
    length: int,
    model_dir: str | None,
    device: str = "cpu",
    architecture: str = "smollm2",
    layers: int | None = None,
) -> dict:
    import numpy as np
    import torch

    from attnlimits.extraction import extract_chunk
    from attnlimits.separability import min_pairwise_distance

    model = load(model_dir, architecture, layers).to(device)
    ids = torch.as_tensor(np.random.default_rng(0).integers(0, 49152, length))
    lengths = [L for L in (64, 256, 1024, 4096, 8192, 16384, 32768) if L <= length]
    if method == "floor":
        model.set_attn_implementation("sdpa")

        def step():
            with torch.inference_mode():
                model(ids.to(device)[None], use_cache=False)
            if device.startswith("cuda"):
                torch.cuda.synchronize()

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
    if device.startswith("cuda"):
        step()  # the first call pays CUDA's kernel loading; a job does it once per chunk batch
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mb": peak}


STAGES = ("distance", "critical_n", "separation", "separability", "gradient", "vanishing")


def truncated_model(model_dir: Path, layers: int, out: Path) -> int:
    """``out``: the model of ``model_dir`` cut to its first ``layers`` layers (config and
    weights; tokenizer files copied); returns the model's own number of layers."""
    import shutil

    from safetensors.numpy import load_file, save_file

    config = json.loads((model_dir / "config.json").read_text())
    total = int(config["num_hidden_layers"])
    out.mkdir(parents=True, exist_ok=True)
    for f in model_dir.iterdir():
        if f.suffix in (".json", ".jinja", ".txt") and f.name != "config.json":
            shutil.copy(f, out / f.name)
    (out / "config.json").write_text(json.dumps({**config, "num_hidden_layers": layers}, indent=2))
    weights = load_file(model_dir / "model.safetensors")
    kept = {
        k: v
        for k, v in weights.items()
        if not k.startswith("layers.") or int(k.split(".")[1]) < layers
    }
    save_file(kept, out / "model.safetensors", metadata={"format": "pt"})
    return total


def stage_table(run: Path) -> dict[tuple[str, int], tuple[float, float, int]]:
    """(stage, L) -> (summed job seconds, largest peak RSS in MB, jobs) from the run's benchmark
    files (results/<run>/benchmarks/analysis/<stage>/L<L>[_...].tsv, T<T>.tsv for the gradient at
    its one L, read as the largest L)."""
    import csv
    import re

    out: dict[tuple[str, int], tuple[float, float, int]] = {}
    # under the paper's protocol the row engine's jobs (rows/L<L>_part<p>, rows/L<L>) compute
    # the distance, separability, critical-N and gradient tables of their L
    for stage in (*STAGES, "rows"):
        for tsv in sorted((run / "benchmarks" / "analysis" / stage).glob("*.tsv")):
            found = re.match(r"L(\d+)", tsv.stem)
            length = int(found.group(1)) if found else -1
            with open(tsv) as fh:
                row = next(csv.DictReader(fh, delimiter="\t"))
            seconds, rss, jobs = out.get((stage, length), (0.0, 0.0, 0))
            out[(stage, length)] = (
                seconds + float(row["s"]),
                max(rss, float(row["max_rss"])),
                jobs + 1,
            )
    return out


def all_rows(args) -> None:
    """--all-rows: the workflow on the model's first --layers layers, its stage times scaled to
    the whole model (module docstring)."""
    name = f"smollm2-all-rows-{args.layers}layer-bench"
    model = Path(tempfile.mkdtemp()) / name
    total = truncated_model(Path(args.model), args.layers, model)
    summary = f"results/{name}/summary"
    targets = [f"{summary}/{s}.csv" for s in ("distance", "critical_n", "separability")]
    targets += [f"{summary}/gradient.csv", f"{summary}/vanishing.csv"]
    overrides = [
        f"corpus={{path: {args.all_rows}}}",
        f"model={{name: {name}, path: {model}, gguf_file: null, package: null}}",
    ]
    cmd = ["snakemake", "--cores", str(args.cores), *targets, "--configfile"]
    cmd += ["config/smollm2-all-rows.yaml", "--config", *overrides]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True)
    wall = time.perf_counter() - start
    floor = json.loads(
        subprocess.run(
            [sys.executable, __file__, "--one", "floor", "8192", "--model", args.model],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )["seconds"]
    table = stage_table(REPO / "results" / name)
    scale = total / args.layers
    print(f"{args.layers} of {total} layers, wall {wall:.0f} s on {args.cores} cores; x{scale:g}")
    print(f"whole-model forward pass at L = 8192 (SDPA): {floor:.1f} s")
    print(
        f"{'stage':<13} {'L':>6} {'jobs':>5} {'job s':>9} {'whole model s':>14} "
        f"{'x forward':>10} {'peak MB':>8}"
    )
    totals: dict[str, float] = {}
    for (stage, length), (seconds, rss, jobs) in sorted(table.items()):
        whole = seconds * scale
        totals[stage] = totals.get(stage, 0.0) + whole
        shown = "T sweep" if length < 0 else str(length)
        print(
            f"{stage:<13} {shown:>6} {jobs:>5} {seconds:>9.1f} {whole:>14.0f} "
            f"{whole / floor:>10.1f} {rss:>8.0f}"
        )
    for stage, whole in totals.items():
        print(f"{stage:<13} {'all':>6} {'':>5} {'':>9} {whole:>14.0f} {whole / floor:>10.1f}")
    grand = sum(totals.values())
    print(
        f"{'all stages':<13} {'':>6} {'':>5} {'':>9} {grand:>14.0f} {grand / floor:>10.1f}"
        f"   = {grand / 3600:.2f} job-hours, {grand / 3600 / args.cores:.2f} h on "
        f"{args.cores} cores at best"
    )


def write_settings(configfile: str, corpus: str, out: str) -> None:
    """--write-settings: the resolved analysis section and seed of --configfile's model (the
    config check's own merge of config/config.yaml and the file), as JSON for --direct."""
    import yaml

    from attnlimits_workflow.config import load_config

    defaults = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    user = {**yaml.safe_load(Path(configfile).read_text()), "corpus": {"path": corpus}}
    merged, runs, default = load_config(
        defaults, user, REPO / "workflow" / "schemas" / "config.schema.yaml", REPO
    )
    analysis = runs[default]["analysis"]
    Path(out).write_text(json.dumps({"seed": merged["seed"], "analysis": analysis}, indent=1))


def job_params(settings: dict, stage: str) -> SimpleNamespace:
    """What a job of ``stage`` is given: the analysis section's shared keys and the stage's own
    analysis.<stage> keys (workflow/rules/common.smk's analysis_settings; the bespoke rules'
    params are the same keys)."""
    a = settings["analysis"]
    shared = ("protocol", "all_rows", "embedding", "zero_weight", "lengths", "bootstrap")
    own = {} if stage == "separation" else a.get(stage, {})
    return SimpleNamespace(seed=settings["seed"], **{k: a[k] for k in shared if k in a}, **own)


def sampling_coverage(table, reference, errors: list[str]) -> dict[str, float]:
    """How well the stated row-sampling errors (``errors``: the "<statistic>_se" columns of a
    table from analysis.all_rows.rows) cover the exact all-rows ``reference``: z = (sampled -
    exact) / se over every (head, statistic) with se > 0; the share with |z| <= 1.96 (0.95 if
    the errors are right and the estimates near normal), the largest |z|, the median se
    relative to the exact value."""
    import numpy as np

    z, relative = [], []
    keys = [c for c in ("layer", "head", "N", "T", "eps") if c in table.columns]
    joined = table.join(reference, on=keys, suffix="__exact")
    for error in errors:
        name = error[: -len("_se")]
        if f"{name}__exact" not in joined.columns:
            continue
        got, exact, se = (
            joined[c].to_numpy().astype(float) for c in (name, f"{name}__exact", error)
        )
        ok = np.isfinite(got) & np.isfinite(exact) & np.isfinite(se) & (se > 0)
        z.append((got[ok] - exact[ok]) / se[ok])
        relative.append(se[ok] / np.maximum(np.abs(exact[ok]), 1e-300))
    z_all = np.concatenate(z) if z else np.array([])
    return {
        "values": int(z_all.size),
        "covered_1.96": float(np.mean(np.abs(z_all) <= 1.96)) if z_all.size else float("nan"),
        "max_abs_z": float(np.abs(z_all).max()) if z_all.size else float("nan"),
        "median_rel_se": float(np.median(np.concatenate(relative))) if z_all.size else float("nan"),
    }


def largest_difference(table, reference) -> float:
    """The largest relative difference between two tables' float columns (inf where they differ
    in shape, in columns, or in which values are finite)."""
    import numpy as np

    if table.columns != reference.columns or table.height != reference.height:
        return float("inf")
    worst = 0.0
    for name in table.columns:
        a, b = table[name], reference[name]
        if not a.dtype.is_float():
            if a.dtype.is_numeric() and not (a == b).all():
                return float("inf")
            continue
        x, y = a.to_numpy().astype(float), b.to_numpy().astype(float)
        if not np.array_equal(np.isfinite(x), np.isfinite(y)):
            return float("inf")
        both = np.isfinite(x)
        if both.any():
            scale = np.maximum(np.abs(y[both]), 1e-300)
            worst = max(worst, float(np.max(np.abs(x[both] - y[both]) / scale)))
    return worst


def direct(args) -> None:
    """--direct: the analysis jobs of --reference's tables, in this process, on --device."""
    import logging
    import re

    import polars as pl

    from attnlimits_workflow.analyses import critical_n, distance, gradient, separability, vanishing
    from attnlimits_workflow.analyses.common import Job, settings_from
    from attnlimits_workflow.dumps.pack import pack_dumps
    from attnlimits_workflow.jobs import Timer
    from attnlimits_workflow.packs import read_pack

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    log = logging.getLogger("direct")
    settings = json.loads(Path(args.settings).read_text())
    settings["analysis"]["all_rows"] = {
        **settings["analysis"]["all_rows"],
        "device": args.device,
        "rows": args.rows if args.rows else "all",
    }
    run, reference, out = Path(args.direct), Path(args.reference), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []

    def record(stage: str, name: str, seconds: float, table) -> None:
        ref = reference / stage / f"{name}.parquet"
        want = pl.read_parquet(ref) if ref.exists() else None
        errors = [c for c in table.columns if c.endswith("_se")]
        row = {"stage": stage, "job": name, "seconds": seconds}
        if errors and want is not None:
            # --rows: the sampled tables against the exact ones, through their stated errors
            row |= sampling_coverage(table, want, errors)
        else:
            row["max_rel_diff"] = float("nan") if want is None else largest_difference(table, want)
        rows.append(row)
        table.write_parquet(out / f"{stage}_{name}.parquet")
        pl.DataFrame(rows).write_csv(out / "direct_jobs.csv")
        log.info("%s %s: %.2f s, %s", stage, name, seconds, {k: row[k] for k in list(row)[3:]})

    packs: dict[int, object] = {}

    def pack(length: int):
        if length not in packs:
            where = run / "samples" / f"L{length}"
            if not where.exists():
                timer = time.perf_counter()
                pack_dumps(
                    sorted((run / "dumps").glob("batch*")),
                    length,
                    settings["analysis"]["embedding"],
                    where,
                    row_chunks=settings["analysis"]["all_rows"]["chunks"],
                )
                rows.append(
                    {"stage": "pack", "job": f"L{length}", "seconds": time.perf_counter() - timer}
                )
            packs[length] = read_pack(where)
        return packs[length]

    def job(stage: str, kind, length: int) -> Job:
        made = None if kind is None else settings_from(kind, job_params(settings, stage))
        return Job(log, Timer(), pack(length), made)

    # STAGES is in dependency order: each separation table before the separability jobs
    names = {
        stage: sorted(p.stem for p in (reference / stage).glob("*.parquet")) for stage in STAGES
    }
    for stage in names:
        if args.stages and stage not in args.stages:
            continue
        for name in names[stage]:
            found = re.match(r"L(\d+)(?:_N(\d+))?$", name)
            start = time.perf_counter()
            if stage == "separation":
                radius = job_params(settings, "separability").radius
                table = separability.pairwise_separation(pack(int(found[1])), radius)
            elif stage == "critical_n":
                table = critical_n.run(job(stage, critical_n.Settings, int(found[1])))
            elif stage == "vanishing":
                table = vanishing.run(
                    job(stage, getattr(vanishing, "Settings", None), int(found[1]))
                )
            elif stage == "distance":
                j = job(stage, distance.Settings, int(found[1]))
                table = distance.analyse(j.pack, int(found[2]), j.settings, log)
            elif stage == "separability":
                j = job(stage, separability.Settings, int(found[1]))
                source = reference / "separation" / f"L{found[1]}.parquet"
                sep = out / f"separation_L{found[1]}.parquet"
                table = separability.analyse(
                    j.pack,
                    int(found[2]),
                    j.settings,
                    separation=pl.read_parquet(sep if sep.exists() else source),
                    source=str(source),
                    log=log,
                )
            else:  # gradient: T<T> at analysis.gradient.length
                j = job(stage, gradient.Settings, int(settings["analysis"]["gradient"]["length"]))
                table = gradient.analyse(j.pack, float(name[1:]), j.settings, log)
            record(stage, name, time.perf_counter() - start, table)
    total = sum(r["seconds"] for r in rows if r["stage"] != "pack")
    print(f"device {args.device}: {len(rows)} jobs, {total:.1f} s of analysis in one process")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(REPO / "resources/models/smollm2-135m"))
    parser.add_argument("--random", action="store_true", help="random weights, no model folder")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--architecture", choices=sorted(ARCHITECTURES), default="smollm2")
    parser.add_argument("--arch-layers", type=int, help="--random: cut to this many layers")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--all-rows", metavar="CORPUS", help="the all-rows stages (docstring)")
    parser.add_argument("--layers", type=int, default=1, help="--all-rows: layers run")
    parser.add_argument("--cores", type=int, default=2, help="--all-rows: snakemake --cores")
    parser.add_argument("--device", default="cpu", help="the forward's and --direct's device")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["floor", "capture", "extract", "delta"],
        help="of the table",
    )
    parser.add_argument("--direct", metavar="RUN", help="the jobs without Snakemake (docstring)")
    parser.add_argument("--reference", help="--direct: a run's analysis folder, the jobs to run")
    parser.add_argument("--settings", help="--direct: the JSON --write-settings wrote")
    parser.add_argument("--out", default="direct-out", help="--direct: tables and timings")
    parser.add_argument(
        "--rows", type=int, help="--direct: analysis.all_rows.rows (drawn rows; default all)"
    )
    parser.add_argument("--stages", nargs="+", help="--direct: only these stages (of STAGES)")
    parser.add_argument("--write-settings", nargs=3, metavar=("CONFIGFILE", "CORPUS", "JSON"))
    args = parser.parse_args()
    if args.write_settings:
        write_settings(*args.write_settings)
        return
    if args.direct:
        direct(args)
        return
    if args.all_rows:
        all_rows(args)
        return
    model_dir = None if args.random else args.model
    if args.one:
        one = run_one(
            args.one[0],
            int(args.one[1]),
            model_dir,
            args.device,
            args.architecture,
            args.arch_layers,
        )
        print(json.dumps(one))
        return
    if model_dir and not (Path(model_dir) / "config.json").exists():
        sys.exit(f"{model_dir}: no model folder; fetch it (config/smollm2.yaml) or pass --random")
    cut = f", {args.arch_layers} layers" if args.arch_layers else ""
    print(f"model: {model_dir or f'{args.architecture} architecture{cut}, random weights'}")
    print(f"{'L':>6} {'method':<8} {'seconds':>9} {'x floor':>8} {'peak MB':>8}")
    for length in args.lengths:
        floor = None
        for method in args.methods:
            cmd = [sys.executable, __file__, "--one", method, str(length)]
            cmd += ["--random"] if args.random else ["--model", model_dir]
            cmd += ["--device", args.device, "--architecture", args.architecture]
            cmd += ["--arch-layers", str(args.arch_layers)] if args.arch_layers else []
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            floor = floor or result["seconds"]
            print(
                f"{length:>6} {method:<8} {result['seconds']:>9.2f} "
                f"{result['seconds'] / floor:>8.2f} {result['peak_mb']:>8.0f}"
            )


if __name__ == "__main__":
    main()
