"""The workflow through a real SLURM scheduler: a single-node cluster on 127.0.0.1
(tests/slurm_cluster.py), the repository's profile, and snakemake-executor-plugin-slurm."""

import os
import re
import subprocess
import time

import polars as pl
import pytest
from project import REPO, assert_same_outputs, tiny_config, write_config
from slurm_cluster import Cluster, _alive, missing_requirements

from attnlimits_workflow.runner import snakemake_command

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]
REASON = missing_requirements()
if REASON:
    pytestmark.append(pytest.mark.skip(reason=REASON))

# No accounting database on the test cluster: job states come from squeue (the cluster keeps
# finished jobs for MinJobAge = 300 s); the first status check after 1 s instead of 40.
PROFILE_ARGS = [
    "--workflow-profile",
    str(REPO / "profiles" / "slurm"),
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "1",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    c.start()
    yield c
    left = c.stop()
    assert left == [], f"daemons still running after teardown: {left}"
    assert not any(_alive(pid) for pid in c.pids().values())


def _snakemake(cluster, workdir, config, *args, **kwargs):
    cmd = snakemake_command(REPO / "Snakefile", workdir, config, *PROFILE_ARGS, *args)
    return subprocess.Popen(
        cmd,
        env=cluster.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def _squeue(cluster, *fields):
    out = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "|".join(fields)],
        env=cluster.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split("|") for line in out.stdout.splitlines()]


@pytest.mark.skipif(
    os.environ.get("ATTNLIMITS_SLURM_FULL") != "1",
    reason="the whole tiny run through SLURM takes ~7 min: set ATTNLIMITS_SLURM_FULL=1 (the "
    "quick test below sends one L's analyses through SLURM and compares them)",
)
def test_workflow_runs_through_slurm_and_equals_the_local_run(cluster, done_run, tmp_path):
    local, _ = done_run
    cfg = write_config(tmp_path, tiny_config(tmp_path))
    proc = _snakemake(cluster, tmp_path, cfg, "all")
    log, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, log[-6000:]

    # Every job went to SLURM: Snakemake logged the ids, slurmctld scheduled and finished them.
    # The main scheduler logs "sched: Allocate JobId=N"; a job the backfill scheduler starts
    # first is logged as "sched/backfill: _start_job: Started JobId=N" instead (which one
    # wins is a race between the two schedulers).
    ids = sorted(set(map(int, re.findall(r"submitted with SLURM jobid (\d+)", log))))
    # chunking, 2 extraction batches, 2 analyses groups, 1 beyond, 1 assembly, effective_config
    assert len(ids) == 8, log[-4000:]
    ctld = cluster.log("slurmctld").read_text()
    for i in ids:
        assert re.search(rf"(Allocate|Started) JobId={i}\b", ctld), i
        assert re.search(rf"_job_complete: JobId={i} done", ctld), i
    comments = {c for _, c in _squeue(cluster, "%i", "%k")}
    # the plugin's job comment names the rule and its wildcards (model, batch)
    assert any(c.startswith("rule_chunk_corpus") for c in comments), comments
    assert any(
        c.startswith("rule_extract_batch_wildcards_") and "tiny-gpt2" in c and "000" in c
        for c in comments
    ), comments

    # The same results as `snakemake --cores 2 all` on one machine.
    assert_same_outputs(local, tmp_path)


def test_cancelled_job_is_reported_a_rerun_completes_and_equals_local(cluster, done_run, tmp_path):
    cfg = write_config(tmp_path, tiny_config(tmp_path))
    target = "results/tiny-gpt2/dumps/batch000"
    proc = _snakemake(cluster, tmp_path, cfg, target)
    deadline = time.monotonic() + 300
    cancelled = None
    while cancelled is None and time.monotonic() < deadline and proc.poll() is None:
        for job_id, comment, state in _squeue(cluster, "%i", "%k", "%T"):
            if comment.startswith("rule_extract_batch") and state == "RUNNING":
                subprocess.run(["scancel", job_id], env=cluster.env(), check=True)
                cancelled = job_id
        time.sleep(0.2)
    log, _ = proc.communicate(timeout=600)
    assert cancelled, "never saw the extraction job running\n" + log[-4000:]
    assert proc.returncode != 0
    assert f"SLURM-job '{cancelled}' failed" in log, log[-4000:]
    assert not (tmp_path / target).exists()  # no half-written dump left behind

    proc = _snakemake(cluster, tmp_path, cfg, target)
    log, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, log[-4000:]
    assert sorted(p.name for p in (tmp_path / target).glob("layer*.parquet")) == [
        "layer00.parquet",
        "layer01.parquet",
    ]

    # One L's analyses group on top of those dumps, through SLURM: the same tables as the local
    # run's (the whole run's comparison above is the long version of this check).
    targets = [
        f"results/tiny-gpt2/analysis/{name}/L16.parquet" for name in ("critical_n", "vanishing")
    ]
    proc = _snakemake(cluster, tmp_path, cfg, *targets)
    log, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, log[-4000:]
    assert re.search(r"submitted with SLURM jobid \d+", log), log[-4000:]
    local, _ = done_run
    for target in targets:
        assert pl.read_parquet(tmp_path / target).equals(pl.read_parquet(local / target)), target
