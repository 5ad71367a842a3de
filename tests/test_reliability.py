"""Interrupted runs lose nothing; bad inputs get one clear line; damaged or foreign dumps are
refused and rebuilt; analysis jobs never import torch."""

import ast
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
import yaml
from project import REPO, snakemake, synthetic_text, tiny_config, write_config

from attnlimits_workflow.runner import snakemake_command


def long_config(tmp):
    """Enough chunks in one batch that the extraction job runs for a few seconds."""
    cfg = tiny_config(tmp)
    (tmp / "corpus.txt").write_text(synthetic_text(40000))
    cfg["chunking"] = {"chunk_length": 64, "n_chunks": 120}
    cfg["extraction"]["chunks_per_batch"] = 120
    return write_config(tmp, cfg)


@pytest.mark.workflow
def test_sigkill_mid_extraction_then_rerun_incomplete(tmp_path):
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    clean.mkdir()
    killed.mkdir()
    snakemake(clean, long_config(clean), "--cores", "1", "results/tiny-gpt2/dumps/batch000")
    cfg = long_config(killed)
    cmd = snakemake_command(
        REPO / "Snakefile", killed, cfg, "--cores", "1", "results/tiny-gpt2/dumps/batch000"
    )
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    log = killed / "logs/tiny-gpt2/extract/batch000.log"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if log.exists() and "chunk 10 (" in log.read_text():
            break
        if proc.poll() is not None:
            pytest.fail("the run ended before it could be interrupted")
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the job and Snakemake itself, with no chance to clean up
    proc.wait()
    dumps = killed / "results/tiny-gpt2/dumps"
    assert not (dumps / "batch000").exists(), "a killed job left an output that looks complete"
    snakemake(killed, cfg, "--unlock")  # a killed Snakemake leaves its lock, by design
    snakemake(killed, cfg, "--cores", "1", "results/tiny-gpt2/dumps/batch000", "--rerun-incomplete")
    for layer in ("layer00.parquet", "layer01.parquet"):
        a = pq.read_table(clean / "results/tiny-gpt2/dumps/batch000" / layer)
        b = pq.read_table(killed / "results/tiny-gpt2/dumps/batch000" / layer)
        assert a.equals(b)
    assert not [p for p in dumps.iterdir() if p.name.startswith(".")], "temporary files left behind"


@pytest.mark.workflow
@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (
            b"*** START OF THE PROJECT GUTENBERG EBOOK X ***\nprince\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n",
            "full chunks of 64",
        ),
        (b"prince andrew \xff\xfe war", "not valid utf-8 at byte 14"),
    ],
    ids=["empty", "shorter-than-a-chunk", "not-utf8"],
)
def test_bad_corpus_is_one_clear_line(tmp_path, content, message):
    cfg = tiny_config(tmp_path)
    (tmp_path / "corpus.txt").write_bytes(content)
    proc = snakemake(
        tmp_path,
        write_config(tmp_path, cfg),
        "--cores",
        "1",
        "results/tiny-gpt2/chunks/tokens.parquet",
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and message in out
    assert not (tmp_path / "results/tiny-gpt2/chunks/tokens.parquet").exists()


@pytest.mark.workflow
def test_corpus_without_markers_is_used_whole_with_a_warning(tmp_path):
    cfg = tiny_config(tmp_path)
    text = synthetic_text().split("***")[2].split("\n", 1)[1]  # the body only
    (tmp_path / "corpus.txt").write_text(text)
    snakemake(
        tmp_path, write_config(tmp_path, cfg), "--cores", "1", "resources/corpus/synthetic.txt"
    )
    assert (
        "no Project Gutenberg START/END markers"
        in (tmp_path / "logs/download_corpus/synthetic.log").read_text()
    )
    assert (tmp_path / "resources/corpus/synthetic.txt").read_text() == text.strip()
    # where the copy came from, so that a later corpus.path giving this name to another text
    # is refused (corpus_names.clash_errors)
    record = json.loads((tmp_path / "resources/corpus/synthetic.source.json").read_text())
    assert record["path"] == str((tmp_path / "corpus.txt").resolve())
    assert record["sha256"] == hashlib.sha256((tmp_path / "corpus.txt").read_bytes()).hexdigest()
    # the same name given to another file is refused before any job, naming both
    other = tmp_path / "other" / "corpus.txt"
    other.parent.mkdir()
    other.write_text(text + " and more")
    cfg["corpus"]["path"] = str(other)
    proc = snakemake(tmp_path, write_config(tmp_path, cfg), "-n", "all", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"{other} would land as resources/corpus/synthetic.txt" in out


@pytest.mark.workflow
def test_a_text_without_a_name_is_filed_under_its_own(tmp_path):
    """corpus={path: /some/other.txt}: the text lands as resources/corpus/other.txt, not under
    the default's war_and_peace."""
    cfg = tiny_config(tmp_path)
    other = tmp_path / "texts" / "other.txt"
    other.parent.mkdir()
    os.replace(tmp_path / "corpus.txt", other)
    cfg["corpus"] = {"path": str(other)}
    proc = snakemake(tmp_path, write_config(tmp_path, cfg), "-n", "all")
    out = proc.stdout + proc.stderr
    assert "resources/corpus/other.txt" in out and "war_and_peace" not in out


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("done")
    cfg = write_config(tmp, tiny_config(tmp))
    snakemake(tmp, cfg, "--cores", "2", "all")
    return tmp, cfg


def rerun_vanishing(work, cfg, *extra, check=True):
    """Force the sample packs (which read every dump) and the vanishing analysis on them."""
    return snakemake(
        work,
        cfg,
        "--cores",
        "2",
        "results/tiny-gpt2/summary/vanishing.csv",
        "--forcerun",
        "pack_samples",
        *extra,
        check=check,
    )


@pytest.mark.workflow
def test_truncated_dump_is_refused_then_rebuilt(finished, tmp_path):
    src, cfg = finished
    work = tmp_path / "w"
    shutil.copytree(src, work)
    layer = work / "results/tiny-gpt2/dumps/batch001/layer01.parquet"
    layer.write_bytes(layer.read_bytes()[:-200])
    proc = rerun_vanishing(work, cfg, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and re.search(
        r"batch001/layer01.parquet: \d+ bytes, checksums.json records \d+ \(truncated\?\)", out
    )
    assert "Traceback" not in out  # the job's own error is one line, not a traceback
    # The batch stays (other jobs of the run fail on it with the same error, instead of waiting
    # for a missing directory) but is set aside and aged, so the next run rebuilds it.
    assert "Missing files" not in out and "set aside as damaged" in out
    assert (work / "results/tiny-gpt2/dumps/batch001/layer01.parquet.corrupt").exists()
    # the same command again: the damaged batch is rebuilt, then the analysis runs
    rerun_vanishing(work, cfg)
    assert pq.read_table(work / "results/tiny-gpt2/dumps/batch001/layer01.parquet").equals(
        pq.read_table(src / "results/tiny-gpt2/dumps/batch001/layer01.parquet")
    )


def flip_bytes(path, fraction: float, n: int = 4) -> None:
    """XOR ``n`` bytes at ``fraction`` of the file, in place (its time moves, as a rewrite's)."""
    with open(path, "r+b") as f:
        at = int(os.fstat(f.fileno()).st_size * fraction)
        f.seek(at)
        data = f.read(n)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in data))


def tables_of(work) -> dict[str, bytes]:
    """Every table, figure and page a run wrote (its dumps and packs aside)."""
    skip = ("dumps", "samples")
    return {
        str(p.relative_to(work)): p.read_bytes()
        for root in ("results", "figures", "docs")
        if (work / root).exists()
        for p in (work / root).rglob("*")
        if p.is_file() and not any(part in skip for part in p.relative_to(work).parts)
    }


@pytest.mark.workflow
@pytest.mark.parametrize("forcerun", [True, False], ids=["forcerun-packs", "plain-rerun"])
def test_four_flipped_bytes_of_a_dump_stop_the_run_by_name(finished, tmp_path, forcerun):
    """Issue 50's probe: 4 bytes XOR-ed at 12 % of layer00.parquet of a finished run, then
    `snakemake all --forcerun pack_samples` (and a plain `snakemake all`: the file changed in
    place makes its readers rerun). The run exits non-zero naming the file, prints no traceback
    and changes no table."""
    src, cfg = finished
    work = tmp_path / "w"
    shutil.copytree(src, work)  # copy2: the times are kept, as the finished run left them
    before = tables_of(work)
    layer = work / "results/tiny-gpt2/dumps/batch000/layer00.parquet"
    flip_bytes(layer, 0.12)
    extra = ("--forcerun", "pack_samples") if forcerun else ()
    proc = snakemake(work, cfg, "--cores", "2", "all", *extra, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        "batch000/layer00.parquet: CRC-32" in out and "set aside as layer00.parquet.corrupt" in out
    )
    assert "Traceback" not in out
    # Snakemake removes the outputs of a job it starts (run.json of describe_run, which reads the
    # dumps too, and fails): nothing is written from the damaged file, nothing rewritten
    after = tables_of(work)
    changed = sorted(k for k in after if after[k] != before.get(k))
    assert not changed, changed


@pytest.mark.workflow
def test_a_damaged_pack_is_set_aside_then_rebuilt(finished, tmp_path):
    """As a damaged dump's batch: the job names the file in one line, the file is set aside and
    the pack aged, and the next plain run rebuilds the pack and finishes."""
    import numpy as np

    src, cfg = finished
    work = tmp_path / "w"
    shutil.copytree(src, work)
    pack = work / "results/tiny-gpt2/samples/L8"
    (pack / "x.npy").write_bytes((pack / "x.npy").read_bytes()[:100])
    target = "results/tiny-gpt2/analysis/vanishing/L8.parquet"
    proc = snakemake(work, cfg, "--cores", "1", target, "--forcerun", "analyse", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "L8/x.npy: 100 bytes, checksums.json records" in out
    assert "set aside as x.npy.corrupt" in out and "Traceback" not in out
    assert (pack / "x.npy.corrupt").exists()
    # the next plain run: the pack is outdated, rebuilt, and the analysis runs on it
    snakemake(work, cfg, "--cores", "1", target)
    rebuilt = np.load(pack / "x.npy")
    assert np.array_equal(rebuilt, np.load(src / "results/tiny-gpt2/samples/L8/x.npy"))
    assert (work / target).exists()


@pytest.mark.workflow
def test_dump_from_another_model_is_refused(finished, tmp_path):
    src, cfg = finished
    other = tmp_path / "other"
    other.mkdir()
    conf = yaml.safe_load(cfg.read_text())
    conf["seed"] = 99  # other random weights
    snakemake(other, write_config(other, conf), "--cores", "2", "results/tiny-gpt2/dumps/batch000")
    work = tmp_path / "w"
    shutil.copytree(src, work)
    shutil.rmtree(work / "results/tiny-gpt2/dumps/batch000")
    shutil.copytree(
        other / "results/tiny-gpt2/dumps/batch000", work / "results/tiny-gpt2/dumps/batch000"
    )
    proc = rerun_vanishing(work, cfg, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "written for another model/corpus (weights_sha256" in out


@pytest.mark.workflow
def test_a_batch_missing_a_layer_file_fails_and_writes_no_table(finished, tmp_path):
    # Once a run exited 0 with that layer on half the chunks, and 45 of 46 tables changed.
    src, cfg = finished
    work = tmp_path / "w"
    shutil.copytree(src, work)
    (work / "results/tiny-gpt2/dumps/batch001/layer01.parquet").unlink()
    summary = work / "results/tiny-gpt2/summary/vanishing.csv"
    before = summary.read_bytes()
    summary.unlink()
    proc = rerun_vanishing(work, cfg, "--keep-going", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "batch001: has layers [0], expected [0, 1] (missing: layer01.parquet)" in out
    assert not summary.exists(), "a summary was written from an incomplete batch"
    assert before  # the complete run had written it


MODEL_PACKAGES = {"torch", "transformers", "entmax", "gguf", "accelerate"}


def rule_environments() -> dict[str, tuple[str, str]]:
    """Per rule with a script: (its conda environment file's name, its script's name)."""
    import re

    found = {}
    for smk in (REPO / "workflow/rules").glob("*.smk"):
        for block in re.split(r"\n(?=rule |checkpoint )", smk.read_text()):
            name = re.match(r"(?:rule|checkpoint) (\w+):", block)
            script = re.search(r'script:\s*"\.\./scripts/([\w.]+)"', block)
            env = re.search(r'conda:\s*"\.\./envs/([\w.]+)"', block)
            if name and script:
                assert env, f"rule {name.group(1)} has a script but no conda environment"
                found[name.group(1)] = (env.group(1), script.group(1))
    return found


GENERIC_SCRIPTS = {"analyse.py", "summarise_analysis.py", "plot_analysis.py"}


def analysis_modules() -> list[str]:
    """Every module of attnlimits_workflow.analyses (those the generic rules may import)."""
    folder = REPO / "src/attnlimits_workflow/analyses"
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def env_packages(name: str) -> set[str]:
    spec = yaml.safe_load((REPO / "workflow/envs" / name).read_text())
    names = set()
    for dep in spec["dependencies"]:
        for item in dep["pip"] if isinstance(dep, dict) else [dep]:
            names.add(re.split(r"[=<>\[ ]", item, maxsplit=1)[0].lower())
    return names - {"python", "pip"}


@pytest.mark.integration
def test_only_model_jobs_get_the_torch_environment():
    import tomllib

    envs = rule_environments()
    assert {env for env, _ in envs.values()} == {"model.yaml", "analysis.yaml"}
    model_jobs = {r for r, (env, _) in envs.items() if env == "model.yaml"}
    assert model_jobs == {
        "fetch_model",
        "chunk_corpus",
        "study_effective_windows",  # chunk_corpus's script on the study's held-out windows
        "extract_batch",
        "train_model",
        "evaluate_model",
        "normalizer",  # sparsemax and 1.5-entmax come from the torch-based entmax package
        "study_gradient",
        "effective_set",  # N*'s intervened forward passes
    }
    # The light environment has none of the model packages; the model one has every dependency
    # pyproject.toml declares (snakemake runs the jobs, it is not in them).
    assert not env_packages("analysis.yaml") & MODEL_PACKAGES
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {re.split(r"[=<>\[ ]", d, maxsplit=1)[0].lower() for d in declared["dependencies"]}
    wanted |= {"gguf", "accelerate"}  # the gguf extra
    assert wanted - {"snakemake"} <= env_packages("model.yaml")
    assert env_packages("analysis.yaml") <= wanted
    # No script of the light environment mentions a model package, and its module-level imports
    # load none of them.
    light = sorted({script for env, script in envs.values() if env == "analysis.yaml"})
    for script in light:
        text = (REPO / "workflow/scripts" / script).read_text()
        assert not {p for p in MODEL_PACKAGES if re.search(rf"\b{p}\b", text)}, script
    # None in sys.modules: `import torch` fails, and find_spec says "not installed" (polars asks)
    blocker = f"import sys\nsys.modules.update(dict.fromkeys({sorted(MODEL_PACKAGES)!r}))\n"
    for script in light:
        tree = ast.parse((REPO / "workflow/scripts" / script).read_text())
        imports = [
            ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
        ]
        if script in GENERIC_SCRIPTS:  # the generic rules import the analysis modules at run time
            imports += [
                f"import attnlimits_workflow.analyses.{name}" for name in analysis_modules()
            ]
        proc = subprocess.run(
            [sys.executable, "-c", blocker + "\n".join(imports)], capture_output=True, text=True
        )
        assert proc.returncode == 0, (script, proc.stderr[-500:])


@pytest.mark.integration
def test_a_fatal_signal_leaves_a_line_in_the_job_log(tmp_path):
    """Native code that aborts (tokenizers' 'memory allocation of N bytes failed') ends the process
    past Python's error handling; the job log must still say so, not end in silence."""
    import subprocess
    import sys

    log = tmp_path / "job.log"
    code = (
        "import os, types\n"
        "from attnlimits_workflow.jobs import job_logger\n"
        f"log = job_logger(types.SimpleNamespace(log=[{str(log)!r}]), 'chunk_corpus')\n"
        "log.info('tokenizing')\n"
        "os.abort()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    text = log.read_text()
    assert "chunk_corpus tokenizing" in text and "Fatal Python error: Aborted" in text


@pytest.mark.integration
def test_job_logs_keep_the_jobs_lines_and_drop_third_party_info(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "job.log"
    code = (
        "import logging, types\n"
        "from attnlimits_workflow.jobs import job_logger\n"
        f"log = job_logger(types.SimpleNamespace(log=[{str(log)!r}]), 'fig2')\n"
        "log.info('fig2 written')\n"
        "logging.getLogger('fontTools.subset').info('MATH subsetted')\n"
        "logging.getLogger('fontTools.subset').warning('a real warning')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for text in (log.read_text(), proc.stderr):
        assert "fig2 fig2 written" in text and "a real warning" in text
        assert "MATH subsetted" not in text


@pytest.mark.unit
def test_random_streams_are_distinct_and_seed_as_before():
    """Each analysis draws from its own stream; stream_rng(seed, id, keys) is the generator the
    scripts used to build inline, so results did not move when the ids got names."""
    import numpy as np

    from attnlimits_workflow.streams import Stream, stream_rng

    assert len({int(s) for s in Stream}) == len(Stream)
    want = np.random.default_rng([2025, 3, 1024, 7, 256]).random(4)
    got = stream_rng(2025, Stream.GRADIENT_DIRECTIONS, 1024, np.int64(7), 256).random(4)
    assert (got == want).all()
