"""A throw-away single-node SLURM cluster on 127.0.0.1, for the cluster tests.

Everything lives in one directory: a generated munge key, slurm.conf, state, spool, logs and the
daemons' PID files. ``start`` brings munged, slurmctld and slurmd up and waits until the node
accepts jobs; ``stop`` kills the daemons by the PIDs they wrote, so nothing outlives the test.
Client commands (sbatch, squeue, scancel, scontrol) find the cluster through SLURM_CONF, which
:meth:`Cluster.env` sets. Inside a job, though, snakemake-executor-plugin-slurm-jobstep strips every
SLURM_* variable but the job's identity before it calls ``srun`` (SLURM_CONF included), so ``srun``
falls back to the compiled-in default path, as on a real cluster. The helper therefore also links
``/etc/slurm/slurm.conf`` to the generated file while the cluster runs; it refuses to start when a
real configuration sits there, and removes only its own link.

Command line (handy when debugging a cluster run by hand):

    python tests/slurm_cluster.py up /tmp/slurm      # prints the export line for SLURM_CONF
    python tests/slurm_cluster.py down /tmp/slurm

Needs Debian's ``slurm-wlm`` and ``munge`` packages and root (slurmd starts jobs as their user).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("slurmd", "slurmctld", "munged")  # stop order: node first, munge last
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")  # where srun looks without SLURM_CONF
REQUIRED_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol")


def missing_requirements() -> str | None:
    """Why a cluster cannot be started here, or None when it can."""
    missing = [b for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if missing:
        return (
            f"SLURM binaries not installed ({', '.join(missing)}): apt-get install slurm-wlm munge"
        )
    if os.geteuid() != 0:
        return "a single-node SLURM cluster needs root (slurmd starts jobs as their user)"
    if (DEFAULT_CONF.exists() or DEFAULT_CONF.is_symlink()) and not _is_test_link(DEFAULT_CONF):
        return f"{DEFAULT_CONF} exists (a real SLURM installation?); not touching it"
    return None


def _is_test_link(path: Path) -> bool:
    """True for a link this helper made (to a slurm.conf that names the test cluster)."""
    if not path.is_symlink():
        return False
    target = Path(os.readlink(path))
    try:
        return "ClusterName=attnlimits-test" in target.read_text()
    except OSError:
        return True  # dangling: a previous test cluster's directory is gone


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    root: Path
    # More than the machine may have: config_overrides below lets the node advertise them, so
    # the profile's requests (4 CPUs for extraction, 8 GB for critical N) fit as on a real node.
    cpus: int = 8
    memory_mb: int = 32000

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def log(self, daemon: str) -> Path:
        return self.root / "log" / f"{daemon}.log"

    def pid_file(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    # -- set-up -------------------------------------------------------------------------------
    def write_config(self) -> None:
        for sub in ("munge", "state", "spool", "log", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "munge").chmod(0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=attnlimits-test",
                    f"SlurmctldHost={host}(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    f"StateSaveLocation={self.root / 'state'}",
                    f"SlurmdSpoolDir={self.root / 'spool'}",
                    f"SlurmctldPidFile={self.pid_file('slurmctld')}",
                    f"SlurmdPidFile={self.pid_file('slurmd')}",
                    f"SlurmctldLogFile={self.log('slurmctld')}",
                    f"SlurmdLogFile={self.log('slurmd')}",
                    "SlurmctldDebug=info",
                    "SlurmdDebug=info",
                    # No cgroups in a container: track processes by parent PID.
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_CPU",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "SlurmdParameters=config_overrides",
                    # Finished jobs stay visible to squeue for 5 minutes: the executor plugin
                    # reads their final state from there (no accounting database here).
                    "MinJobAge=3600",  # finished jobs stay in squeue for the whole test run
                    "SchedulerParameters=sched_interval=1",
                    "KillWait=2",
                    f"NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} "
                    f"RealMemory={self.memory_mb} State=UNKNOWN",
                    "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _run(self, *cmd: str) -> None:
        subprocess.run(cmd, check=True, env=self.env(), capture_output=True, text=True)

    def start(self, timeout: float = 60.0) -> None:
        """Write the configuration, start the three daemons and wait until the node is idle."""
        reason = missing_requirements()
        if reason:
            raise RuntimeError(reason)
        self.write_config()
        if DEFAULT_CONF.is_symlink():
            DEFAULT_CONF.unlink()  # a stale link of ours (checked by missing_requirements)
        DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
        DEFAULT_CONF.symlink_to(self.conf)
        self._run(
            "munged",
            "--force",
            f"--socket={self.munge_socket}",
            f"--key-file={self.root / 'munge' / 'munge.key'}",
            f"--pid-file={self.pid_file('munged')}",
            f"--log-file={self.log('munged')}",
            f"--seed-file={self.root / 'munge' / 'munge.seed'}",
        )
        self._run("slurmctld", "-f", str(self.conf))
        self._run("slurmd", "-f", str(self.conf))
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], env=self.env(), capture_output=True, text=True
            )
            state = out.stdout.strip()
            if out.returncode == 0 and state in ("idle", "mixed", "allocated"):
                return
            time.sleep(0.5)
        logs = "\n".join(
            f"--- {d}:\n{self.log(d).read_text()[-2000:]}" for d in DAEMONS if self.log(d).exists()
        )
        self.stop()
        raise RuntimeError(f"SLURM node not ready after {timeout:.0f} s (state {state!r})\n{logs}")

    # -- tear-down ----------------------------------------------------------------------------
    def pids(self) -> dict[str, int]:
        out = {}
        for daemon in DAEMONS:
            f = self.pid_file(daemon)
            if f.exists() and f.read_text().strip():
                out[daemon] = int(f.read_text().split()[0])
        return out

    def stop(self, timeout: float = 20.0) -> list[str]:
        """Cancel every job, kill the daemons (TERM, then KILL) and the job step daemons they
        left, and return the names of any still alive."""
        if self.conf.exists():
            subprocess.run(
                ["scancel", "--full", "--partition=debug"], env=self.env(), capture_output=True
            )
        pids = self.pids()
        pids.update({f"slurmstepd[{p}]": p for p in self._step_daemons()})
        for pid in pids.values():
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_alive(p) for p in pids.values()):
            time.sleep(0.2)
        for pid in pids.values():
            _signal(pid, signal.SIGKILL)
        time.sleep(0.2)
        if DEFAULT_CONF.is_symlink() and Path(os.readlink(DEFAULT_CONF)) == self.conf:
            DEFAULT_CONF.unlink()
        return [d for d, p in pids.items() if _alive(p)]

    def _step_daemons(self) -> list[int]:
        """slurmstepd processes of this cluster: their working directory or log is under root."""
        found = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if proc.joinpath("comm").read_text().strip() != "slurmstepd":
                    continue
                links = [os.readlink(proc / "cwd")]
                links += [os.readlink(f) for f in (proc / "fd").iterdir()]
            except OSError:
                continue
            if any(link.startswith(str(self.root)) for link in links):
                found.append(int(proc.name))
        return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not running.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("up", "down"):
        sys.exit("usage: slurm_cluster.py up|down DIRECTORY")
    cluster = Cluster(Path(sys.argv[2]).resolve())
    if sys.argv[1] == "up":
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        left = cluster.stop()
        sys.exit(f"still running: {left}" if left else 0)
