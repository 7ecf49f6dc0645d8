"""`spendlake serve` as a process: one per lake, SIGTERM waits for jobs and leaves no temp files,
SIGHUP reads the config again."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import pytest
from servicekit import REPO, start_serve, write_config

pytestmark = pytest.mark.slow  # `spendlake serve` subprocesses


def config_data(tmp_path) -> dict:
    return {"lake": str(tmp_path / "lake"), "service": {"listen": "127.0.0.1:0"}}


def test_25_a_second_serve_on_the_same_lake_refuses_and_names_the_pid_and_host(tmp_path):
    config = write_config(tmp_path, config_data(tmp_path))
    proc, base = start_serve(config)
    try:
        assert base.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(base + "/healthz", timeout=10) as response:
            assert json.load(response) == {"status": "ok"}
        second = subprocess.run([sys.executable, "-m", "service", "--config", str(config), "serve"], cwd=REPO,
                                capture_output=True, text=True, timeout=30)
        assert second.returncode == 3
        assert f"another spendlake serve holds the lake (pid {proc.pid} on {socket.gethostname()} #" in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert "stopped" in "".join(proc.output)


SLOW_SERVICE = """
import sys, time
from service.core.config import load_config
from service.core.files import write_json_atomic
from service.core.lake import Lake
from service.serve.scheduler import Tasks
from service.serve.service import serve

config = load_config(sys.argv[1])
release = config.lake.parent / "release-job"  # made by a test that ends the job itself

def slow_daily(day):
    with Lake(config.lake).scratch() as scratch:  # a job's work in progress, as ingest has it
        (scratch / "partial.parquet").write_bytes(b"half")
        print("job started", flush=True)
        deadline = time.monotonic() + float(sys.argv[2])
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        write_json_atomic(config.lake.parent / "reports" / "done.json", {"day": day.isoformat()})
        print("job done", flush=True)

serve(config, tasks=Tasks(ingest=lambda: None, rules=None, daily=slow_daily), announce=lambda l: print(l, flush=True),
      reload=lambda: load_config(sys.argv[1]))
"""


def start_slow_service(tmp_path, job_seconds: float) -> tuple[subprocess.Popen, list[str]]:
    """A service whose make-up daily run (it starts at once on a new lake) takes `job_seconds`, or
    until release_job(tmp_path); returns once that job has started, with the lines printed so far."""
    config = write_config(tmp_path, config_data(tmp_path))
    script = tmp_path / "slow_service.py"
    script.write_text(textwrap.dedent(SLOW_SERVICE))
    proc = subprocess.Popen([sys.executable, str(script), str(config), str(job_seconds)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin"})
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "job started" in line:
            return proc, lines
    raise AssertionError(f"the slow service ended (exit {proc.wait()}) before its job started:\n" + "".join(lines))


def release_job(tmp_path) -> None:
    """Let the slow service's job finish now: a test that asserts the job is still running
    must not race a timer (under load the service's steps can take longer than any timer)."""
    (tmp_path / "release-job").touch()


def stopped_output(proc: subprocess.Popen, lines: list[str]) -> str:
    """SIGTERM the service, check it exits 0, and return all it printed."""
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
    return "".join(lines + proc.stdout.readlines())


def test_24_sigterm_waits_for_the_running_job_exits_0_and_leaves_no_temp_files(tmp_path):
    proc, lines = start_slow_service(tmp_path, job_seconds=1.5)
    output = stopped_output(proc, lines)
    assert "stopping: waiting for running jobs" in output and output.rstrip().endswith("stopped")
    assert json.loads((tmp_path / "reports" / "done.json").read_text())["day"]
    assert json.loads((tmp_path / "lake" / "_state" / "jobs.json").read_text())["daily"]["last_run_date"]
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.name.startswith("scratch-")
                 or p.name == "partial.parquet"]
    assert leftovers == []


def served(proc, count: int, timeout: float = 60) -> str:
    """The base URL of the `count`-th "serving" line of `proc` (a reload binds again)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        urls = re.findall(r"serving (http://\S+)", "".join(proc.output))
        if len(urls) >= count:
            return urls[count - 1]
        assert proc.poll() is None, "spendlake serve exited:\n" + "".join(proc.output)
        time.sleep(0.2)
    raise AssertionError(f"no serving line number {count}:\n" + "".join(proc.output))


def readyz(base: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_sighup_reads_the_config_again_and_serves_it_without_exiting(tmp_path):
    config = write_config(tmp_path, config_data(tmp_path))
    proc, base = start_serve(config)
    try:
        assert readyz(base) == (200, {"status": "ready"})  # no source yet
        (tmp_path / "export").mkdir()
        write_config(tmp_path, {**config_data(tmp_path),
                                "sources": [{"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}]})
        proc.send_signal(signal.SIGHUP)
        reloaded = served(proc, 2)
        status, body = readyz(reloaded)
        assert (status, body["not_ready"]) == (503, ["cur"])  # the new source counts
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)
    output = "".join(proc.output)
    assert "reloading: waiting for running jobs" in output and "starting again with the reloaded config" in output
    assert output.rstrip().endswith("stopped")


def test_sighup_with_a_config_that_does_not_load_keeps_serving_the_running_one(tmp_path):
    config = write_config(tmp_path, config_data(tmp_path))
    proc, base = start_serve(config)
    try:
        config.write_text(config.read_text() + "rules: {no-such-rule: {}}\n")
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while "SIGHUP: the config was not reloaded" not in "".join(proc.output) and time.monotonic() < deadline:
            time.sleep(0.2)
        output = "".join(proc.output)
        assert "SIGHUP: the config was not reloaded, still serving the running one: " in output
        assert "no-such-rule" in output.split("SIGHUP:", 1)[1].splitlines()[0]
        assert readyz(base) == (200, {"status": "ready"}) and "reloading" not in output
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)


def test_sighup_with_the_config_emptied_keeps_serving_the_running_lake(tmp_path):
    """A SIGHUP while the file was empty (a shell's `>` before its text, a save caught halfway) read it
    as the defaults: the service moved to a new ./spendlake-data/lake with no source, ready, and
    wrote a daily report of nothing there."""
    config = write_config(tmp_path, config_data(tmp_path))
    proc, base = start_serve(config)
    try:
        config.write_text("")
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while "SIGHUP:" not in "".join(proc.output) and time.monotonic() < deadline:
            time.sleep(0.2)
        output = "".join(proc.output)
        assert "SIGHUP: the config was not reloaded, still serving the running one: " in output
        assert "the config holds no settings" in output.split("SIGHUP:", 1)[1].splitlines()[0]
        assert readyz(base) == (200, {"status": "ready"}) and "reloading" not in output
        assert not (tmp_path / "spendlake-data").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)


def test_sighup_during_a_job_keeps_answering_until_the_job_is_done(tmp_path):
    """The reload waits for the running job, as SIGTERM does, with /healthz still answering:
    a liveness probe must not find the service gone while it finishes a long ingest."""
    proc, lines = start_slow_service(tmp_path, job_seconds=120)  # until release_job
    try:
        base = re.search(r"serving (http://\S+)", "".join(lines))[1]
        proc.send_signal(signal.SIGHUP)
        for line in proc.stdout:
            lines.append(line)
            if "reloading: waiting for running jobs" in line:
                break
        with urllib.request.urlopen(base + "/healthz", timeout=30) as response:
            assert response.status == 200
        assert not (tmp_path / "reports" / "done.json").exists()  # the job is still running
        release_job(tmp_path)
        for line in proc.stdout:
            lines.append(line)
            if line.count("serving http://") and "".join(lines).count("serving http://") == 2:
                break
        assert json.loads((tmp_path / "reports" / "done.json").read_text())["day"]
        output = stopped_output(proc, lines)
    finally:
        proc.kill()
    assert output.index("job started") < output.index("reloading") < output.index("job done") \
        < output.index("starting again")
    assert output.rstrip().endswith("stopped")


def changed_gauge(base: str) -> str:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
        return re.search(r"^spendlake_config_file_changed (\S+)$", response.read().decode(), re.M)[1]


def test_a_config_edited_without_sighup_is_said_once_and_exported_until_loaded(tmp_path):
    config = write_config(tmp_path, config_data(tmp_path))
    proc, base = start_serve(config)
    try:
        assert changed_gauge(base) == "0.0"
        write_config(tmp_path, {**config_data(tmp_path), "service": {"listen": "127.0.0.1:0", "top_n": 5}})
        deadline = time.monotonic() + 10
        while "config changed on disk" not in "".join(proc.output) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert changed_gauge(base) == "1.0"
        time.sleep(1)  # several more checks of the main loop: still one line
        assert "".join(proc.output).count("config changed on disk; send SIGHUP to load it") == 1
        proc.send_signal(signal.SIGHUP)
        assert changed_gauge(served(proc, 2)) == "0.0"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)


def test_43_probes_and_scrapes_during_a_sighup_reload_are_all_answered_on_the_same_port(tmp_path):
    """A reload closed the port and bound it again: a scrape or probe in between was refused
    (curl 000, Prometheus's `up` 0). The listening socket is kept when the address is the same."""
    import threading

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        listen = f"127.0.0.1:{free.getsockname()[1]}"
    config = write_config(tmp_path, {**config_data(tmp_path), "service": {"listen": listen}})
    proc, base = start_serve(config)
    answers, done = [], threading.Event()

    def probe():
        while not done.is_set():
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=10) as response:
                    answers.append(response.status)
            except (urllib.error.URLError, OSError) as error:
                answers.append(repr(error))

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        for count in (2, 3):
            write_config(tmp_path, {**config_data(tmp_path), "service": {"listen": listen, "top_n": count}})
            proc.send_signal(signal.SIGHUP)
            assert served(proc, count) == base
        time.sleep(0.5)
    finally:
        done.set()
        prober.join(30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)
    assert answers and set(answers) == {200}, [a for a in answers if a != 200][:3]


def test_the_service_log_shows_what_it_committed_and_what_failed_without_secrets(tmp_path):
    """`serve` logged at WARNING: its log never showed a delivery committed, a partition restored
    or skipped, an inventory source's failure line, only that the job failed. Without -v it shows
    the service's own events (INFO), not every module's detail, and never a URL's password."""
    export = tmp_path / "export"
    export.mkdir()
    (export / "focus.csv").write_text("BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd\n"
                                      "12.5,USD,2026-11-01T00:00:00Z,2026-11-20T00:00:00Z,2026-11-20T01:00:00Z\n")
    password = "tiger-s3cret-42"
    config = write_config(tmp_path, {**config_data(tmp_path),
                                     "sources": [{"name": "focus-main", "kind": "focus", "location": str(export)}],
                                     "inventory": [{"name": "k8s", "kind": "k8s-pods", "max_attempts": 1,
                                                    "timeout_seconds": 2,
                                                    "prometheus_url": f"http://scott:{password}@127.0.0.1:1"}]})
    proc, _ = start_serve(config)
    try:
        deadline = time.monotonic() + 60
        while "job ingest failed" not in "".join(proc.output) and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    time.sleep(0.2)  # the drain thread reads the last lines
    output = "".join(proc.output)
    assert re.search(r"INFO service\.serve\.service: ingest: focus-main 2026-11: committed 1 rows USD 12\.5", output)
    assert re.search(r"ERROR service\.serve\.scheduler: job ingest failed: k8s \(k8s-pods\): http://127\.0\.0\.1:1/", output)
    assert password not in output and "scott" not in output
    assert "apscheduler" not in output and "service.ingest.rollups" not in output  # per-module detail needs -v



def metrics_page(proc, base: str) -> str:
    """The /metrics page of `proc` serving at `base`; an error answer fails with what the service printed
    (a 500's traceback is in its log, under the request id the answer names)."""
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=60) as response:
            return response.read().decode()
    except urllib.error.HTTPError as error:
        body = error.read().decode(errors="replace")
        time.sleep(0.5)  # the drain thread reads the service's last lines
        raise AssertionError(f"/metrics answered {error.code}: {body}\nspendlake serve printed:\n"
                             + "".join(proc.output)) from None


def sample(page: str, name: str, labels: str = "") -> float | None:
    """One sample of a /metrics page, or None when the series is not on it."""
    found = re.search(rf"^{re.escape(name)}{re.escape(labels and '{' + labels + '}')} (\S+)$", page, re.MULTILINE)
    return float(found.group(1)) if found else None


USED = ("spendlake_budget_used_ratio", 'budget="nlp-monthly",dimension="team",value="nlp"')
MARKED = ("spendlake_metrics_last_good", 'group="budgets"')


def budgeted_serve_then_damaged(tmp_path):
    """`serve` of a lake with a budget 120% used, once it showed that read anew, then its cost
    partition moved away: the config file and the process."""
    from servicekit import commit

    from service.attribution import build_tops
    from service.core.config import load_config
    from service.core.lake import Lake

    (tmp_path / "export").mkdir()
    source = {"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}
    data = {**config_data(tmp_path), "sources": [source],
            "budgets": [{"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]}
    config = write_config(tmp_path, data)
    lake = Lake(tmp_path / "lake")
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "24", {"team": "nlp"})])
    build_tops(lake, load_config(str(config)))  # as an ingest stores them: the spend series a restart shows
    proc, base = start_serve(config)
    try:
        deadline = time.monotonic() + 60
        while sample(page := metrics_page(proc, base), *MARKED) != 0 and time.monotonic() < deadline:
            time.sleep(0.5)  # held back while the start's jobs run; read once they are done
        assert (sample(page, *USED), sample(page, *MARKED)) == (1.2, 0), page + "".join(proc.output)
    except BaseException:
        proc.kill()
        raise
    next(lake.table_dir("costs").glob("*/*/data.parquet")).rename(tmp_path / "aside.parquet")
    return config, proc


def test_a_sighup_on_a_damaged_lake_keeps_the_last_good_budget_series(tmp_path):
    """The last-good cost families lived in the collector a reload replaced: after a SIGHUP while
    a cost partition was missing, the budget series (no stored form) vanished and their alerts
    resolved. The reloaded service keeps showing the last read ones, marked, and so does one
    started again (stored in `_state/`)."""
    config, proc = budgeted_serve_then_damaged(tmp_path)
    try:
        proc.send_signal(signal.SIGHUP)
        page = metrics_page(proc, served(proc, 2))
        assert (sample(page, "spendlake_lake_readable"), sample(page, *USED), sample(page, *MARKED)) == (0, 1.2, 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)
    assert (tmp_path / "lake" / "_state" / "metrics_last_good.json").exists()  # the service's loop stored them
    proc, base = start_serve(config)  # a restart on the damaged lake: as stored
    try:
        page = metrics_page(proc, base)
        assert (sample(page, "spendlake_lake_readable"), sample(page, *USED), sample(page, *MARKED)) == (0, 1.2, 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)


def reloaded_and_restarted(tmp_path, change: dict) -> tuple[str, str]:
    """The /metrics pages of the damaged lake after a SIGHUP to a config changed by `change`, and
    after a restart with it."""
    config, proc = budgeted_serve_then_damaged(tmp_path)
    try:
        data = {**config_data(tmp_path), "sources": [{"name": "cur", "kind": "focus",
                                                      "location": str(tmp_path / "export")}],
                "budgets": [{"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]}
        write_config(tmp_path, {**data, **change})
        proc.send_signal(signal.SIGHUP)
        reloaded = metrics_page(proc, served(proc, 2))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)
    proc, base = start_serve(config)
    try:
        return reloaded, metrics_page(proc, base)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)


def test_a_sighup_that_changes_the_budgets_on_a_damaged_lake_shows_none_as_a_restart_does(tmp_path):
    """A reload whose config declares other budgets kept the old config's budget series, marked
    last good, while a restart showed none (the stored ones are another config's): the reload now
    shows none too, until the lake can be read."""
    other = {"budgets": [{"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "30"}]}
    for page in reloaded_and_restarted(tmp_path, other):
        assert sample(page, "spendlake_lake_readable") == 0
        assert (sample(page, *USED), sample(page, *MARKED)) == (None, None)
        assert "spendlake_budget_" not in page.replace("# HELP spendlake_budget_", "").replace(
            "# TYPE spendlake_budget_", "")


def test_a_sighup_that_changes_attribution_on_a_damaged_lake_shows_the_spend_a_restart_does(tmp_path):
    """The spend, commitment and cluster series come from tops stored per attribution config: a
    reload to another one (here top_n) kept the old config's (spendlake_spend_usd of team nlp),
    marked last good, where a restart shows the new config's stored tops, here none; the reload
    now shows what the restart does."""
    reloaded, restarted = reloaded_and_restarted(tmp_path, {"service": {"listen": "127.0.0.1:0", "top_n": 5}})

    def spend(page: str) -> list[str]:
        return sorted(line for line in page.splitlines() if line.startswith(("spendlake_spend", "spendlake_commitment",
                                                                             "spendlake_cluster"))
                      or line.startswith("spendlake_metrics_last_good{") and "budgets" not in line)
    assert sample(reloaded, "spendlake_lake_readable") == 0
    assert spend(reloaded) == spend(restarted), (spend(reloaded), spend(restarted))


def wait_for_output(proc, text: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while text not in "".join(proc.output) and time.monotonic() < deadline:
        time.sleep(0.2)
    return "".join(proc.output)


def test_a_sighup_to_an_address_in_use_or_a_lake_another_service_holds_keeps_serving_the_running_config(tmp_path):
    """The config loads, but only starting the service with it finds it wrong (a lake folder that cannot be
    made raised an OSError out of the reload: a traceback, the process gone): it used to be found after the
    running service had let go of its port and lake, and the process exited (`error: service.listen: cannot
    listen on ...`), taking the scrapes and the jobs with it. A refused config makes nothing on disk."""
    config = write_config(tmp_path, config_data(tmp_path))
    proc, base = start_serve(config)
    taken = socket.socket()
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other, _ = start_serve(write_config(other_dir, config_data(other_dir)))
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = "127.0.0.1:%d" % taken.getsockname()[1]
        new_lake = tmp_path / "new-lake"  # a refused config made its new lake folder (empty) all the same
        write_config(tmp_path, {**config_data(tmp_path), "service": {"listen": address}, "lake": str(new_lake)})
        proc.send_signal(signal.SIGHUP)
        output = wait_for_output(proc, "SIGHUP:")
        said = output.split("SIGHUP:", 1)[1].splitlines()[0]
        assert said.startswith(" the config was not reloaded, still serving the running one: ")
        assert f"cannot listen on {address}: Address already in use — choose a free address for service.listen " \
               f"in {config} and send SIGHUP again; the running service keeps its address meanwhile" in said
        assert readyz(base) == (200, {"status": "ready"}) and proc.poll() is None and "reloading" not in output
        assert not new_lake.exists()

        write_config(tmp_path, {**config_data(tmp_path), "lake": str(other_dir / "lake")})
        proc.send_signal(signal.SIGHUP)
        output = wait_for_output(proc, f"holds the lake {other_dir / 'lake'}")
        said = output.rsplit("SIGHUP:", 1)[1].splitlines()[0]
        assert f"still serving the running one: lake: another spendlake serve holds the lake {other_dir / 'lake'} " \
               f"(pid {other.pid} on " in said
        assert readyz(base) == (200, {"status": "ready"}) and proc.poll() is None and "reloading" not in output

        write_config(tmp_path, {**config_data(tmp_path), "lake": "/proc/spendlake-lake"})  # a folder never made
        proc.send_signal(signal.SIGHUP)
        output = wait_for_output(proc, "/proc/spendlake-lake")
        said = output.rsplit("SIGHUP:", 1)[1].splitlines()[0]
        assert "still serving the running one: /proc/spendlake-lake: no such file or directory" in said
        assert readyz(base) == (200, {"status": "ready"}) and proc.poll() is None and "reloading" not in output

        write_config(tmp_path, config_data(tmp_path) | {"service": {"listen": "127.0.0.1:0"}, "rules": {}})
        proc.send_signal(signal.SIGHUP)  # a config it can start with still reloads
        assert "serving http://" in wait_for_output(proc, "starting again with the reloaded config").rsplit(
            "starting again", 1)[1]
    finally:
        taken.close()
        for each in (proc, other):
            each.send_signal(signal.SIGTERM)
            assert each.wait(timeout=30) == 0, "".join(each.output)
