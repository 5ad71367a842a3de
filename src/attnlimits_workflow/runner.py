"""The command line that runs this repository's workflow from Python (tests and benchmarks)."""

from __future__ import annotations

import sys
from pathlib import Path


def snakemake_command(
    snakefile: str | Path, workdir: str | Path, config: str | Path, *args: str
) -> list[str]:
    """``snakemake -s SNAKEFILE -d WORKDIR ARGS --configfile CONFIG`` with this interpreter.

    --configfile takes several values, so it goes last, after targets and flags.
    """
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "-d",
        str(workdir),
        *args,
        "--configfile",
        str(config),
    ]
