"""A real one-node Slurm cluster for the tests, from Debian 12's packages (slurm-wlm 22.05):
munged, MariaDB, slurmdbd, slurmctld, slurmd and slurmrestd, every file under one directory,
every socket on 127.0.0.1 or in that directory, all run as root (slurmrestd as nobody: it
refuses root). `slurm_cluster` (session-scoped) starts it, submits `WORKLOAD` and stops it.

Chosen for this machine (gVisor, no systemd, 2 shared cores) and for speed:
- proctrack/linuxproc, task/none, jobacct_gather/none: no cgroups needed or used.
- GPUs: slurmd 22.05 drops a gpu gres without File= ("Removing file-less GPU"), so gres.conf
  names eight placeholder character devices (mknod c 1 3, /dev/null's numbers) in our
  directory; nothing opens them (task/none constrains no devices). Regular files work as a
  fallback: slurmd logs "not a valid character or block device" and still counts them.
- CPUs=16 on a 2-core machine (SlurmdParameters=config_overrides) so the jobs run together.
- Memory is not a consumable (CR_Core): sacct's AllocTRES has no mem= on the job line.
- TIMEOUT takes a minute: Slurm time limits are whole minutes (--time=1 is the least) and
  slurmctld checks them every 30 s, so the timeout job ends 60-90 s after it starts.

Processes are found again by the marker SPENDLAKE_SLURM_RUN=<directory> in their environment
(daemons, slurmstepd and job scripts all inherit it): a run whose owner died (its lock is
free) is cleaned up by the next, and nothing of ours outlives `stop()`.
Run `python tests/slurm_cluster.py tests/data/slurm` to re-capture the files under
tests/data/slurm/ (see the README there)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conftest import stop

import pytest
from conftest import require_binary

CLUSTER = "spendlake"
NODE = "gpu-node-01"
GPUS = 8
ACCOUNTS = ("pretrain", "posttrain", "eval")
REST_VERSION = "v0.0.38"  # the newest of the OpenAPI versions 22.05 serves (v0.0.36 to v0.0.38)
MARKER = "SPENDLAKE_SLURM_RUN"
BASE = Path(tempfile.gettempdir()) / "spendlake-slurm"
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "slurmrestd")  # start order
SACCT_FORMAT = ("JobID,JobIDRaw,JobName,Cluster,Partition,Account,User,Group,QOS,WCKey,Comment,State,"
                "ExitCode,DerivedExitCode,Reason,Submit,Eligible,Start,End,Elapsed,ElapsedRaw,Timelimit,"
                "TimelimitRaw,NNodes,NodeList,AllocCPUS,AllocTRES,ReqTRES,Flags")
# On every read: all users' jobs, every attempt of a requeued job (without -D only the last),
# and an explicit --starttime (sacct's default window is since midnight).
SACCT_FLAGS = ("--allusers", "--duplicates")


def shape(value, path: str = "") -> set[str]:
    """Every key path in a JSON value (list items under `[]`), with the types its values take."""
    if isinstance(value, dict):
        return {path + "/" + key for key in value} | {p for key, item in value.items()
                                                     for p in shape(item, f"{path}/{key}")}
    if isinstance(value, list):
        return {p for item in value for p in shape(item, path + "[]")}
    return set() if value is None else {f"{path}:{type(value).__name__}"}


class CommandFailed(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (OSError, CommandFailed, ValueError) as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" ({last})" if last else ""))


def marked_pids(root: Path) -> list[int]:
    """Every process whose environment carries this run's marker."""
    needle = f"{MARKER}={root}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes() + b"\0":
                    found.append(int(entry.name))
            except OSError:
                continue  # gone, or not ours to read
    return found


def kill_marked(root: Path, timeout: float = 5) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked_pids(root):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while marked_pids(root) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not marked_pids(root):
            return


def clean_stale_runs() -> None:
    """Stop and remove the clusters of earlier runs that died without stopping them; a run
    still holding its lock (another test session) is left alone."""
    for root in BASE.glob("run-*"):
        try:
            with open(root / "lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                kill_marked(root)
        except BlockingIOError:
            continue
        except FileNotFoundError:
            pass
        shutil.rmtree(root, ignore_errors=True)


class SlurmCluster:
    def __init__(self) -> None:
        BASE.mkdir(parents=True, exist_ok=True)
        clean_stale_runs()
        # Locked before it is named run-*, so a concurrent session never takes it for stale.
        fresh = Path(tempfile.mkdtemp(prefix="new-", dir=BASE))
        self._lock = open(fresh / "lock", "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.root = fresh.with_name("run-" + fresh.name[4:])
        fresh.rename(self.root)
        self.root.chmod(0o755)  # munged wants its socket's path traversable; slurmrestd runs as nobody
        self.ports = {name: free_port() for name in ("mariadb", "slurmdbd", "slurmctld", "slurmd", "slurmrestd")}
        self.conf = self.root / "etc" / "slurm.conf"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SBATCH", "SQUEUE", "SACCT"))}
        self.env.update(SLURM_CONF=str(self.conf), TZ="UTC", **{MARKER: str(self.root)})
        self.procs: dict[str, subprocess.Popen] = {}
        self.rest = f"http://127.0.0.1:{self.ports['slurmrestd']}"

    # -- commands -------------------------------------------------------------------------
    def run(self, *args: str, user: str | None = None, timeout: float = 30) -> str:
        command = (["runuser", "-u", user, "--"] if user else []) + list(args)
        done = subprocess.run(command, env=self.env, cwd=self.root / "jobs", capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode:
            raise CommandFailed(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return done.stdout

    def sacct(self, *args: str) -> str:
        """sacct over everything since the workload began, every attempt of every user's jobs."""
        return self.run("sacct", *SACCT_FLAGS, f"--starttime={self.since}", *args)

    def sacct_json(self) -> dict:
        return json.loads(self.sacct("--json"))

    def sacct_parsable(self) -> str:
        return self.sacct("--parsable2", f"--format={SACCT_FORMAT}")

    def token(self, user: str = "root", lifespan: int = 3600) -> str:
        return self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan}").strip().split("=", 1)[1]

    def rest_get(self, path: str, user: str = "root", token: str | None = None) -> bytes:
        """GET from slurmrestd with a JWT in the X-SLURM-USER-* headers (a fresh one by default)."""
        request = urllib.request.Request(self.rest + path, headers={
            "X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token or self.token(user)})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()

    def rest_jobs(self, bounded: bool = True) -> bytes:
        """/slurmdb/v0.0.38/jobs since the workload began (unbounded: without start_time)."""
        query = "?start_time=" + urllib.parse.quote(self.since) if bounded else ""
        return self.rest_get(f"/slurmdb/{REST_VERSION}/jobs{query}")

    def state_of(self, job_id: int) -> str:
        return self.run("squeue", "-h", "-j", str(job_id), "-o", "%T").strip()

    # -- life cycle -----------------------------------------------------------------------
    def start(self) -> SlurmCluster:
        for name in ("etc", "state", "spool", "log", "run", "db", "munge", "dev", "jobs"):
            (self.root / name).mkdir()
        (self.root / "jobs").chmod(0o777)  # the array job runs as nobody and writes its output here
        try:
            self._munge()
            self._mariadb()
            self._write_configs()
            self._daemon("slurmdbd", ["slurmdbd", "-D"])
            wait_for(lambda: self.run("sacctmgr", "-n", "show", "cluster") is not None, 60, "slurmdbd to answer", 0.5)
            self.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
            self.run("sacctmgr", "-i", "add", "account", *ACCOUNTS, f"cluster={CLUSTER}")
            for user in ("root", "nobody"):
                self.run("sacctmgr", "-i", "add", "user", user, f"account={','.join(ACCOUNTS)}",
                         f"defaultaccount={ACCOUNTS[0]}")
            self._daemon("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
            wait_for(lambda: "UP" in self.run("scontrol", "ping"), 60, "slurmctld to answer", 0.5)
            self._daemon("slurmd", ["slurmd", "-D", "-N", NODE, "-f", str(self.conf)])
            wait_for(lambda: " State=IDLE " in self.run("scontrol", "-o", "show", "node", NODE), 60,
                     f"{NODE} to be idle", 0.5)
            self._daemon("slurmrestd", ["slurmrestd", "-f", str(self.conf), "-a", "rest_auth/jwt",
                                        "-s", f"openapi/db{REST_VERSION},openapi/{REST_VERSION}", "-u", "nobody",
                                        f"127.0.0.1:{self.ports['slurmrestd']}"], SLURM_JWT="daemon")
            wait_for(lambda: self.rest_get(f"/slurm/{REST_VERSION}/ping"), 30, "slurmrestd to answer")
        except BaseException:
            print(self.logs())  # shown by pytest when start-up fails
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel what still runs, stop every daemon (reverse order), then anything left
        with our marker, and remove the directory."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            try:
                self.run("scancel", "--full", "--user=root", timeout=10)
                self.run("scancel", "--full", "--user=nobody", timeout=10)
                wait_for(lambda: not self.run("squeue", "-h", "-o", "%i").strip(), 20, "the queue to drain", 0.5)
            except (AssertionError, CommandFailed, subprocess.SubprocessError):
                pass  # the daemons go anyway
        for name in reversed(DAEMONS):
            proc = self.procs.pop(name, None)
            if proc:
                stop(proc)
        kill_marked(self.root)
        self._lock.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def logs(self) -> str:
        tails = [f"--- {log.name}\n" + log.read_text(errors="replace")[-3000:]
                 for log in sorted((self.root / "log").glob("*.log"))]
        return f"Slurm cluster under {self.root}\n" + "\n".join(tails)

    def _daemon(self, name: str, command: list[str], **env: str) -> None:
        with open(self.root / "log" / f"{name}.out.log", "ab") as out:
            self.procs[name] = subprocess.Popen(command, env={**self.env, **env}, cwd=self.root, stdout=out,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                start_new_session=True)
        time.sleep(0.1)
        if self.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited at start ({self.procs[name].returncode})")

    def _munge(self) -> None:
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = self.root / "munge" / "munge.socket"
        self._daemon("munged", ["munged", "--foreground", f"--socket={self.munge_socket}", f"--key-file={key}",
                                f"--pid-file={self.root / 'run' / 'munged.pid'}",
                                f"--log-file={self.root / 'log' / 'munged.log'}",
                                f"--seed-file={self.root / 'munge' / 'munged.seed'}"])
        wait_for(self.munge_socket.exists, 20, "munged's socket")

    def _mariadb(self) -> None:
        datadir, self.db_socket = self.root / "db" / "data", self.root / "db" / "mysql.sock"
        # A throwaway database: no fsync, small logs (a default install writes 100 MB).
        fast = ["--innodb-log-file-size=4M", "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0", "--innodb-flush-method=nosync", "--skip-name-resolve"]
        self.run("mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
                 "--auth-root-authentication-method=socket", "--skip-test-db", *fast, timeout=120)
        self._daemon("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root",
                                  f"--socket={self.db_socket}", "--bind-address=127.0.0.1",
                                  f"--port={self.ports['mariadb']}", f"--log-error={self.root / 'log' / 'mariadb.log'}",
                                  f"--pid-file={self.root / 'run' / 'mariadbd.pid'}", *fast])
        sql = ["mariadb", "--no-defaults", f"--socket={self.db_socket}", "-u", "root", "-e"]
        wait_for(lambda: self.run(*sql, "SELECT 1"), 60, "MariaDB to answer", 0.3)
        self.run(*sql, "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm-test';"
                       "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")

    def _write_configs(self) -> None:
        etc, root, ports = self.root / "etc", self.root, self.ports
        jwt = etc / "jwt.key"
        jwt.write_bytes(os.urandom(32))
        jwt.chmod(0o600)
        auth = (f"AuthType=auth/munge\nAuthInfo=socket={self.munge_socket}\n"
                f"AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={jwt}\n")
        dbd = etc / "slurmdbd.conf"
        dbd.write_text(auth + f"""DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports['slurmdbd']}
SlurmUser=root
PidFile={root}/run/slurmdbd.pid
LogFile={root}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports['mariadb']}
StorageUser=slurm
StoragePass=slurm-test
StorageLoc=slurm_acct_db
TrackWCKey=yes
""")
        dbd.chmod(0o600)  # slurmdbd refuses a readable slurmdbd.conf (it holds the password)
        for i in range(GPUS):  # placeholder GPUs (see the module's docstring)
            device = root / "dev" / f"nvidia{i}"
            try:
                os.mknod(device, 0o600 | 0o020000, os.makedev(1, 3))
            except OSError:
                device.touch()
        (etc / "gres.conf").write_text(f"AutoDetect=off\nNodeName={NODE} Name=gpu File={root}/dev/nvidia[0-{GPUS - 1}]\n")
        self.conf.write_text(auth + f"""ClusterName={CLUSTER}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ports['slurmctld']}
SlurmdPort={ports['slurmd']}
SlurmUser=root
SlurmdUser=root
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
# No cgroups: this machine (gVisor) has none to give.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# An extern step per job, as GPU clusters with pam_slurm_adopt have.
PrologFlags=Contain
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Take CPUs=16 on trust.
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={ports['slurmdbd']}
# The munge socket for slurmdbd connections (AuthInfo covers only the others).
AccountingStoragePass={self.munge_socket}
# Without it AllocTRES and tres.allocated carry no gres/gpu.
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations
# Without it sacct's Comment stays empty.
AccountingStoreFlags=job_comment
TrackWCKey=yes
OverTimeLimit=0
KillWait=2
MinJobAge=10
MessageTimeout=10
NodeName={NODE} NodeAddr=127.0.0.1 CPUs=16 RealMemory=16000 Gres=gpu:{GPUS} State=UNKNOWN
PartitionName=train Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
PartitionName=eval Nodes={NODE} MaxTime=INFINITE State=UP
""")

    # -- the workload ---------------------------------------------------------------------
    def submit(self, workload: tuple[Spec, ...]) -> None:
        """Submit every spec (the timeout job first: it needs a minute), then cancel, requeue
        and release as the specs say, waiting only as long as that needs."""
        self.since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - 5))
        self.jobs: dict[str, Submitted] = {}
        for spec in workload:
            options = [f"--job-name={spec.name}", f"--account={spec.account}", f"--partition={spec.partition}",
                       "--output=%x-%j.out", *spec.options]
            for option, value in (("--gres=gpu:", spec.gpus), ("--wckey=", spec.wckey), ("--comment=", spec.comment)):
                if value:
                    options.append(f"{option}{value}")
            before = time.time()
            job_id = int(self.run("sbatch", "--parsable", *options, f"--wrap={spec.script}", user=spec.user).strip())
            self.jobs[spec.key] = Submitted(spec, job_id, int(before), int(time.time()) + 1)
        # The pending job first: it must be cancelled before anything frees a GPU.
        for job in sorted(self.jobs.values(), key=lambda job: job.spec.action != "cancel-pending"):
            if job.spec.action == "cancel-pending":
                self.run("scancel", str(job.job_id))
            elif job.spec.action in ("cancel", "requeue"):
                # slurmstepd creates the output file as the batch step starts; a job cancelled
                # before that has no batch step ("already killed, do not launch batch job").
                output = self.root / "jobs" / f"{job.spec.name}-{job.job_id}.out"
                wait_for(output.exists, 60, f"{job.spec.name}'s batch step to start")
                if job.spec.action == "cancel":
                    self.run("scancel", str(job.job_id))
                else:
                    self.run("scontrol", "requeue", str(job.job_id))
                    # A requeued job may not start for 120 s (its BeginTime); let it go now, but not
                    # within the second its first run was killed: slurmd would refuse the new
                    # credential as revoked ("already killed") and the job would FAIL.
                    wait_for(lambda: self.state_of(job.job_id) == "PENDING", 60, f"{job.spec.name} to be pending")
                    time.sleep(2)
                    self.run("scontrol", "update", f"JobId={job.job_id}", "StartTime=now")

    def records(self, data: dict, job: Submitted) -> list[dict]:
        """`job`'s records in sacct/slurmrestd JSON: one per attempt, one per array task."""
        return [r for r in data["jobs"] if job.job_id in (r["job_id"], r["array"]["job_id"])]

    def settled(self, keys: tuple[str, ...] | None = None, timeout: float = 150) -> dict:
        """sacct --json once accounting holds the final records of `keys` (all by default)."""
        wanted, seen = [self.jobs[k] for k in keys or self.jobs], {}

        def final() -> dict | None:
            data = self.sacct_json()
            seen.update({job.spec.name: tuple(r["state"]["current"] for r in self.records(data, job)) for job in wanted})
            return data if all(seen[job.spec.name] == job.spec.states for job in wanted) else None
        try:
            return wait_for(final, timeout, "accounting to record the jobs' final states", 1)
        except AssertionError as error:
            raise AssertionError(f"{error}; recorded: {seen}") from None


@dataclass(frozen=True)
class Spec:
    key: str
    name: str
    account: str
    partition: str
    gpus: int
    script: str
    states: tuple[str, ...]  # the states of its records in sacct -D, in order
    wckey: str = ""
    comment: str = ""
    options: tuple[str, ...] = ()
    user: str = "root"
    action: str = ""  # "cancel" or "requeue" once its batch step runs, or "cancel-pending" at once


@dataclass(frozen=True)
class Submitted:
    spec: Spec
    job_id: int
    before: int  # epoch seconds around the sbatch call
    after: int


# What the fixture submits: at most 8 GPUs at once, so nothing waits for another.
WORKLOAD = (
    Spec("timeout", "pretrain-llama-timeout", "pretrain", "train", 1, "sleep 150", ("TIMEOUT",),
         wckey="llama-70b", options=("--time=1",)),
    Spec("completed", "pretrain-llama-r1", "pretrain", "train", 2, "sleep 3", ("COMPLETED",), wckey="llama-70b",
         comment='{"run": "llama-70b-r1", "job_type": "pretrain"}'),
    Spec("failed", "sft-crash", "posttrain", "train", 1, "sleep 1; exit 3", ("FAILED",), wckey="sft-v2",
         comment="run=sft-v2 job_type=sft"),
    Spec("cancelled", "debug-notebook", "pretrain", "eval", 2, "sleep 100", ("CANCELLED",), action="cancel"),
    Spec("requeued", "pretrain-restart", "pretrain", "train", 1,
         'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 2; else sleep 100; fi', ("REQUEUED", "COMPLETED"),
         wckey="llama-8b", options=("--requeue",), action="requeue"),
    Spec("steps", "eval-harness", "eval", "eval", 1, "srun -n1 sleep 1; srun -n1 true", ("COMPLETED",),
         wckey="nightly-eval"),
    Spec("array", "eval-sweep", "eval", "eval", 0, "sleep 1", ("COMPLETED", "COMPLETED"), options=("--array=0-1",),
         user="nobody"),
    # Last, when the others hold all eight GPUs: it pends (Resources) and is cancelled at once,
    # so it is never allocated. (A job held with --hold is not eligible: sacct --starttime
    # never lists it, cancelled or not.)
    Spec("pending", "debug-pending", "pretrain", "train", 8, "sleep 1", ("CANCELLED",), action="cancel-pending"),
)
BINARIES = ("munged", "mariadb-install-db", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "slurmrestd", "sbatch",
            "sacct", "sacctmgr", "scontrol", "runuser")


@pytest.fixture(scope="session")
def slurm_cluster():
    """The running cluster with `WORKLOAD` submitted (the jobs may still be running: use
    `settled()`); stopped at the end of the session."""
    for binary in BINARIES:
        require_binary(binary)
    if os.geteuid() != 0:  # slurmd must run as root to start jobs as their users
        (pytest.fail if os.environ.get("CI", "").lower() == "true" else pytest.skip)("the Slurm cluster runs as root")
    cluster = SlurmCluster().start()
    try:
        cluster.submit(WORKLOAD)
        yield cluster
    finally:
        cluster.stop()


def capture(folder: Path) -> None:
    """Write tests/data/slurm/: what this cluster's sacct and slurmrestd return for WORKLOAD."""
    from connectors.slurm_records import SACCT_FORMAT as DOCUMENTED_FORMAT

    cluster = SlurmCluster().start()
    try:
        cluster.submit(WORKLOAD)
        folder.mkdir(parents=True, exist_ok=True)
        # While jobs still run (End Unknown), in the --format list README documents.
        (folder / "sacct-running.json").write_text(cluster.sacct("--json"))
        (folder / "sacct-running-parsable2.txt").write_text(
            cluster.sacct("--parsable2", f"--format={DOCUMENTED_FORMAT}"))
        cluster.settled(timeout=200)
        (folder / "sacct.json").write_text(cluster.sacct("--json"))
        (folder / "sacct-parsable2.txt").write_text(cluster.sacct_parsable())
        (folder / "slurmrestd-jobs.json").write_bytes(cluster.rest_jobs())
    finally:
        cluster.stop()


if __name__ == "__main__":
    capture(Path(sys.argv[1]))
