"""The fixed cost of one analysis job: what a job pays before it computes anything (issue 23).

Measured side by side in one run and printed as one table:

  1. imports, each in a fresh interpreter (best of --repeats): the bare interpreter, numpy, polars,
     pyarrow, scipy.stats, and the module-level imports of the analysis scripts, with and without
     scipy.stats (which the KS jobs imported for every test until the equal-size exact p-value
     moved into attnlimits.critical);
  2. Snakemake's job slot: --jobs jobs of an empty `script:` rule on --cores cores, then the same
     jobs with the critical-N script's import header (today's and with scipy.stats), as wall
     seconds and as core-seconds per job (wall x cores / jobs).

Usage: python benchmarks/job_cost.py [--jobs 40] [--cores 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"
# "analyse.py:<name>": the generic adapter running registered analysis <name> (it imports the
# analysis module at run time, so the module's import is added to the script's).
KS_SCRIPTS = ["analyse.py:critical_n", "analyse_heads.py"]
OTHER_SCRIPTS = ["analyse_distance.py", "analyse_separability.py", "plot_fig2.py"]
OLD_KS_IMPORT = "from scipy import stats"


def import_header(script: str) -> str:
    """The script's module-level imports, one statement per line (``script:analysis``: with the
    analysis module the generic adapter imports)."""
    script, _, analysis = script.partition(":")
    tree = ast.parse((SCRIPTS / script).read_text())
    imports = [
        ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    if analysis:
        imports.append(f"import attnlimits_workflow.analyses.{analysis}")
    return "\n".join(imports)


def best_of(code: str, repeats: int) -> float:
    """Wall seconds of `python -c code` in a fresh interpreter, best of ``repeats``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        best = min(best, time.perf_counter() - start)
    return best


SNAKEFILE = """
rule all:
    input:
        expand("out/{{i}}.txt", i=range({jobs})),


rule job:
    output:
        "out/{{i}}.txt",
    log:
        "logs/{{i}}.log",
    script:
        "job.py"
"""


def snakemake_wall(body: str, jobs: int, cores: int) -> float:
    """Wall seconds of `snakemake --cores cores` running ``jobs`` jobs whose script is ``body``
    followed by writing its output (Snakemake's own start-up and DAG timed apart, subtracted)."""
    tmp = Path(tempfile.mkdtemp(prefix="job_cost_"))
    try:
        (tmp / "Snakefile").write_text(SNAKEFILE.format(jobs=jobs))
        (tmp / "job.py").write_text(body + "\nopen(snakemake.output[0], 'w').close()\n")
        command = [sys.executable, "-m", "snakemake", "all", "--cores", str(cores), "--quiet"]
        dry = [*command, "--dry-run"]
        start = time.perf_counter()
        subprocess.run(dry, cwd=tmp, check=True, capture_output=True)
        planning = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(command, cwd=tmp, check=True, capture_output=True)
        return time.perf_counter() - start - planning
    finally:
        shutil.rmtree(tmp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    rows = []
    bare = best_of("pass", args.repeats)
    rows.append(("interpreter start-up", bare, ""))
    for name, code in [
        ("numpy", "import numpy"),
        ("polars", "import polars"),
        ("pyarrow.parquet", "import pyarrow.parquet"),
        ("scipy.stats", "from scipy import stats"),
    ]:
        rows.append((f"import {name}", best_of(code, args.repeats) - bare, "over start-up"))
    for script in KS_SCRIPTS:
        header = import_header(script)
        now = best_of(header, args.repeats) - bare
        before = best_of(header + "\n" + OLD_KS_IMPORT, args.repeats) - bare
        rows.append((f"{script} imports, with scipy.stats (before)", before, "over start-up"))
        rows.append((f"{script} imports, now", now, "over start-up"))
    for script in OTHER_SCRIPTS:
        rows.append((f"{script} imports", best_of(import_header(script), args.repeats) - bare, ""))

    per_job = {}
    for label, body in [
        ("empty script", "pass"),
        (
            "critical-N imports, with scipy.stats (before)",
            import_header(KS_SCRIPTS[0]) + "\n" + OLD_KS_IMPORT,
        ),
        ("critical-N imports, now", import_header(KS_SCRIPTS[0])),
    ]:
        wall = snakemake_wall(body, args.jobs, args.cores)
        per_job[label] = wall * args.cores / args.jobs
        rows.append(
            (
                f"Snakemake, {args.jobs} jobs: {label}",
                wall,
                f"{per_job[label]:.3f} core-s per job",
            )
        )

    print(f"\nFixed cost of one job ({args.cores} cores, best of {args.repeats} for imports)\n")
    print("| what | seconds | note |")
    print("|---|---:|---|")
    for what, seconds, note in rows:
        print(f"| {what} | {seconds:.3f} | {note} |")
    slot = per_job["empty script"]
    now = per_job["critical-N imports, now"]
    print(
        f"\nPer job: Snakemake's slot {slot:.3f} core-s; a KS job's fixed cost "
        f"{per_job['critical-N imports, with scipy.stats (before)']:.3f} -> {now:.3f} core-s."
    )


if __name__ == "__main__":
    main()
