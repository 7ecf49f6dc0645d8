"""Reads never write, and never see half a change (RELIABILITY 43, 44): `attribute`, the HTTP
API and `/metrics` of a running `spendlake serve` answer in loops while ingests, re-ingests of
a changed delivery, `spendlake rollup` and config changes run; two configs share one lake;
a read-only lake still answers."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from service.attribution import attribute, materialise, reconcile
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.timewindow import Window
from tests.conftest import require_binary
from tests.servicekit import REPO, start_serve

EVERYTHING = ["--since", "2000-01-01", "--until", "2100-01-01"]
HEADER = ["BilledCost", "EffectiveCost", "ListCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
          "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ServiceName", "ResourceId", "Tags"]
ATTRIBUTIONS = [  # the same dollars placed two ways: totals never depend on the config
    {"dimensions": {"team": {"tags": ["team"]}}},
    {"dimensions": {"team": {"tags": ["owner", "team"],
                             "rules": [{"match": {"service": "Storage"}, "value": "infra"}]}}},
]


def month_start(moment: datetime) -> datetime:
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def bill(recent: list[str], older: str, now: datetime) -> str:
    """A FOCUS CSV: one line two months back, and `recent` hourly lines within the last 6 hours
    (inside every metric window: 24h, 7d, month to date)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(HEADER)
    old = month_start(month_start(now) - timedelta(days=40))
    rows = [(older, old, "Storage", "vol-1", {"team": "data"})]
    first = max(now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=6), month_start(now))
    rows += [(cost, first + timedelta(minutes=10 * i), "Compute", f"i-{i}", {"team": ["nlp", "vision"][i % 2]})
             for i, cost in enumerate(recent)]
    for cost, start, service, resource, tags in rows:
        writer.writerow([cost, cost, cost, "USD", month_start(start).isoformat(), "", start.isoformat(),
                         (start + timedelta(minutes=10)).isoformat(), "Usage", service, resource, json.dumps(tags)])
    return out.getvalue()


def swap(export: Path, text: str) -> None:
    """Replace the export's one file at once (a new delivery of both periods)."""
    staged = export.parent / "staged.csv"
    staged.write_text(text, encoding="utf-8")
    os.replace(staged, export / "bill.csv")


def write_yaml(path: Path, data: dict) -> None:
    staged = path.with_name(path.name + ".new")
    staged.write_text(yaml.safe_dump(data), encoding="utf-8")
    os.replace(staged, path)  # a reader loads the old config or the new one


def spendlake(config: Path, *args: str, as_nobody: bool = False) -> subprocess.CompletedProcess:
    """`spendlake` in a subprocess; `as_nobody`: as user nobody, without capabilities."""
    nobody = [require_binary("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups",
              "--inh-caps=-all", "--bounding-set=-all"] if as_nobody else []
    return subprocess.run([*nobody, sys.executable, "-m", "service", "--config", str(config), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError as error:  # no answer at all (refused, timed out): status 0 says so, with why
        return 0, repr(error).encode()


def metric_values(text: str, name: str, **labels: str) -> list[float]:
    found = []
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                found.append(float(line.rsplit(" ", 1)[1]))
    return found


def api_sees(answers: list, total: Decimal, patience: float = 60) -> None:
    """Wait until the API loop's latest answer holds `total` (or `patience` seconds pass)."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        if answers and answers[-1][0] == 200 and Decimal(json.loads(answers[-1][1])["totals"][0]["cost"]) == total:
            return
        time.sleep(0.05)


def rollup_files(lake: Path) -> set[Path]:
    return set((lake / "attribution_rollup").rglob("*.parquet"))


@pytest.mark.slow
def test_43_attribute_api_and_metrics_in_loops_during_ingests_rollups_and_config_changes(tmp_path):
    now = datetime.now(timezone.utc)
    bills = {"a": (["10.25", "20.5"], "100"), "b": (["11.125", "20.5", "4"], "103.5")}
    totals = {k: sum(map(Decimal, recent), Decimal(older)) for k, (recent, older) in bills.items()}
    recent_totals = {k: float(sum(map(Decimal, recent))) for k, (recent, _) in bills.items()}
    export = tmp_path / "export"
    export.mkdir()
    swap(export, bill(*bills["a"], now))
    lake = tmp_path / "lake"
    base = {"lake": str(lake), "sources": [{"name": "bill", "kind": "focus", "location": str(export)}]}
    cli_config, serve_config = tmp_path / "spendlake.yaml", tmp_path / "serve.yaml"
    write_yaml(cli_config, {**base, "attribution": ATTRIBUTIONS[0]})
    write_yaml(serve_config, {**base, "attribution": ATTRIBUTIONS[0],
                              "service": {"listen": "127.0.0.1:0", "ingest_every_minutes": 600}})
    proc, url = start_serve(serve_config)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the service's own first ingest
            page = get(url + "/metrics")[1].decode()
            if metric_values(page, "spendlake_job_last_success_timestamp_seconds", task="ingest"):
                break
            time.sleep(0.5)
        else:
            pytest.fail("the service's first ingest did not finish:\n" + "".join(proc.output))
        assert rollup_files(lake), "the service's ingest job builds the rollups"

        stop = threading.Event()
        answers: dict[str, list] = {"cli": [], "check": [], "api": [], "metrics": []}

        def cli_loop() -> None:
            while not stop.is_set():
                done = spendlake(cli_config, "attribute", *EVERYTHING, "--format", "json")
                answers["cli"].append((done.returncode, done.stdout, done.stderr))
                done = spendlake(cli_config, "attribute", "--check", "--format", "json")
                answers["check"].append((done.returncode, done.stdout, done.stderr))

        def api_loop() -> None:
            while not stop.is_set():
                answers["api"].append(get(url + "/api/v1/attribute?since=2000-01-01&until=2100-01-01&by=team"))

        def metrics_loop() -> None:
            while not stop.is_set():
                answers["metrics"].append(get(url + "/metrics"))
                time.sleep(0.1)

        readers = [threading.Thread(target=loop) for loop in (cli_loop, api_loop, metrics_loop)]
        for reader in readers:
            reader.start()
        writes = []
        try:
            for version, attribution in [("b", 1), ("a", 0)]:
                swap(export, bill(*bills[version], now))
                writes.append(spendlake(cli_config, "ingest"))  # a re-ingest: both periods change
                api_sees(answers["api"], totals[version])  # readers meet each state, however loaded the machine
                write_yaml(cli_config, {**base, "attribution": ATTRIBUTIONS[attribution]})  # rolled up in memory
                time.sleep(0.5)
                writes.append(spendlake(cli_config, "rollup"))
        finally:
            stop.set()
            for reader in readers:
                reader.join(timeout=180)
        assert [w.returncode for w in writes] == [0] * len(writes), [w.stderr for w in writes]
        assert all(" committed " in w.stdout for w in writes[::2])

        assert len(answers["cli"]) >= 2 and len(answers["api"]) >= 5 and len(answers["metrics"]) >= 5, \
            {k: len(v) for k, v in answers.items()}
        seen = set()
        for code, out, err in answers["cli"]:
            assert code == 0 and "Traceback" not in err, err
            [total] = json.loads(out)["totals"]
            assert Decimal(total["cost"]) in totals.values(), total
            seen.add(Decimal(total["cost"]))
        for code, out, err in answers["check"]:
            assert code == 0, out + err
        refused = [(status, body.decode(errors="replace")) for status, body in answers["api"] if status != 200]
        assert not refused, f"{len(refused)} of {len(answers['api'])} API answers were not 200: {refused[:3]}\n" \
                            + "the service's log:\n" + "".join(proc.output)[-3000:]
        for status, body in answers["api"]:
            [total] = json.loads(body)["totals"]
            assert Decimal(total["cost"]) in totals.values(), total
            seen.add(Decimal(total["cost"]))
        for status, body in answers["metrics"]:
            page = body.decode()
            assert status == 200 and metric_values(page, "spendlake_lake_readable") == [1.0], (status, page[-2000:])
            week = sum(metric_values(page, "spendlake_spend_usd", window="7d"))
            assert any(abs(week - t) < 1e-9 for t in recent_totals.values()), week
        assert seen == set(totals.values()), "the readers saw both deliveries"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


# ---- the same, one moment at a time (in-process) ----------------------------------------------

def focus_setup(tmp_path: Path, version: str = "a") -> tuple[Path, dict]:
    export = tmp_path / "export"
    export.mkdir(exist_ok=True)
    swap(export, bill(*BILLS[version], NOW))
    return export, {"lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus",
                                                                   "location": str(export)}]}


NOW = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)
BILLS = {"a": (["10.25", "20.5"], "100"), "b": (["11.125", "20.5", "4"], "103.5")}
TOTALS = {k: sum(map(Decimal, recent), Decimal(older)) for k, (recent, older) in BILLS.items()}
ALL_TIME = Window(datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc))


def total(lake: Lake, config) -> Decimal:
    [(currency, cost, _)] = attribute(lake, config, ALL_TIME).totals
    return cost


@pytest.mark.slow
def test_43_a_reader_between_a_commit_placing_its_files_and_recording_them_sees_the_new_state(
        tmp_path, monkeypatch):
    from service.ingest.billing import ingest

    export, base = focus_setup(tmp_path)
    config = parse_config({**base, "attribution": ATTRIBUTIONS[0]})
    assert not ingest(config).failed
    lake = Lake.of(config)
    seen = []
    record = Lake.record

    def reading_record(self, entries):
        # Both periods' new files are in place; the ledger still records the old delivery
        # and announces the new one as pending.
        seen.append((total(lake, config), all(r.ok for r in reconcile(lake, config)),
                     {c.state for c in lake.cost_checks()}))
        record(self, entries)

    monkeypatch.setattr(Lake, "record", reading_record)
    swap(export, bill(*BILLS["b"], NOW))
    assert not ingest(config).failed
    assert seen == [(TOTALS["b"], True, {"ok"})]
    assert total(lake, config) == TOTALS["b"] and lake.ledger_state().pending == ()


def died_after_placing(tmp_path: Path, monkeypatch) -> tuple:
    """(config, lake) after bill "a" was ingested and an ingest of bill "b" died between placing
    its files and recording their entries (its entries left pending)."""
    from service.ingest.billing import ingest

    export, base = focus_setup(tmp_path)
    config = parse_config({**base, "attribution": ATTRIBUTIONS[0]})
    assert not ingest(config).failed
    with monkeypatch.context() as dying:
        dying.setattr(Lake, "record", lambda self, entries: (_ for _ in ()).throw(KeyboardInterrupt()))
        swap(export, bill(*BILLS["b"], NOW))
        with pytest.raises(KeyboardInterrupt):
            ingest(config)
    return config, Lake.of(config)


@pytest.mark.slow
def test_43_a_commit_that_died_after_placing_its_files_is_settled_by_the_next_ingest(tmp_path, monkeypatch):
    from service.ingest.billing import ingest

    config, lake = died_after_placing(tmp_path, monkeypatch)
    assert lake.ledger_state().pending and total(lake, config) == TOTALS["b"]  # the files match the pending entries
    assert not ingest(config).failed
    assert lake.ledger_state().pending == () and total(lake, config) == TOTALS["b"]


def test_43_status_and_the_bills_tell_the_file_a_commit_that_died_placed(tmp_path, monkeypatch):
    """An ingest killed after placing a period's new file and before recording its entry: every
    answer goes by the entry that describes the file in place (the pending one), `status` and the
    report's bills as the lines do, until the next ingest records it (break54's F2: status said the
    old bill, check ok, while attribute and the same report's invoices said the new one)."""
    from service.ingest.status import status
    from service.report.sections.bills import bills_section

    config, lake = died_after_placing(tmp_path, monkeypatch)
    assert lake.ledger_state().pending and total(lake, config) == TOTALS["b"]
    rows = status(lake)
    assert {row["check"] for row in rows} == {"ok"}
    assert sum(Decimal(row["billed_cost"]) for row in rows) == TOTALS["b"]
    [bills] = [t for t in bills_section(lake, NOW.date(), frozenset(), {}).tables if t.key == "bills"]
    assert sum(Decimal(row["billed_cost"]) for row in bills.rows) == TOTALS["b"] - Decimal(BILLS["b"][1])


def jumped_clock(hours: float) -> type[datetime]:
    """`datetime` whose now() is `hours` away from the real one (an NTP step, a VM resumed)."""
    moment = datetime.now(timezone.utc) + timedelta(hours=hours)

    class Jumped(datetime):
        @classmethod
        def now(cls, tz=None):
            return moment

    return Jumped


@pytest.mark.slow
def test_43_a_clock_jump_neither_lets_a_reader_read_half_a_commit_nor_wait_for_a_dead_one(tmp_path, monkeypatch):
    """A commit is in flight while the writer that announced it holds the ingest lock, whatever
    the clock says: a clock stepped 2 hours forward while one period's new file is in place and
    the other's is not keeps readers waiting; a commit whose process died is not waited for,
    even with the clock stepped back."""
    from service.core import commit, snapshot
    from service.ingest.billing import ingest

    export, base = focus_setup(tmp_path)
    config = parse_config({**base, "attribution": ATTRIBUTIONS[0]})
    assert not ingest(config).failed
    lake = Lake.of(config)
    placed, seen = [], []
    install = commit.install

    def placing(staged, target):
        install(staged, target)
        placed.append(target)
        if len(placed) == 1:  # one period new, the other still old
            with monkeypatch.context() as clock:
                clock.setattr(snapshot, "datetime", jumped_clock(2), raising=False)
                seen.append(snapshot.take_snapshot(lake).in_flight)

    monkeypatch.setattr(commit, "install", placing)
    swap(export, bill(*BILLS["b"], NOW))
    assert not ingest(config).failed
    assert seen == [True] and total(lake, config) == TOTALS["b"]

    monkeypatch.setattr(Lake, "record", lambda self, entries: (_ for _ in ()).throw(KeyboardInterrupt()))
    swap(export, bill(*BILLS["a"], NOW))
    with pytest.raises(KeyboardInterrupt):
        ingest(config)
    monkeypatch.undo()
    assert lake.ledger_state().pending
    for hours in (0, -2):
        monkeypatch.setattr(snapshot, "datetime", jumped_clock(hours), raising=False)
        assert not snapshot.take_snapshot(lake).in_flight


def test_43_queries_write_nothing_and_a_rollup_removed_under_a_query_is_read_again(tmp_path, monkeypatch):
    from service.attribution import rollup as rollups
    from service.ingest.billing import ingest

    _, base = focus_setup(tmp_path)
    config = parse_config({**base, "attribution": ATTRIBUTIONS[0]})
    assert not ingest(config).failed
    lake = Lake.of(config)
    before = {p: p.stat().st_mtime_ns for p in lake.root.rglob("*") if p.is_file()}
    stored = rollup_files(lake.root)
    assert stored
    view = rollups.rollup_view

    def removing_view(*args):
        files, narrowed = view(*args)
        for file in files:  # as a build would after the grace period, just as this query starts to read
            file.unlink()
        return files, narrowed

    monkeypatch.setattr(rollups, "rollup_view", removing_view)
    monkeypatch.setattr("service.attribution.compute.rollup_view", removing_view)
    assert total(lake, config) == TOTALS["a"]  # read again: rolled up in memory
    assert rollup_files(lake.root) == set()
    monkeypatch.undo()
    assert total(lake, parse_config({**base, "attribution": ATTRIBUTIONS[1]})) == TOTALS["a"]
    assert {p: p.stat().st_mtime_ns for p in lake.root.rglob("*") if p.is_file()} == {
        p: t for p, t in before.items() if p not in stored}  # nothing written, only what the test removed


@pytest.mark.slow
def test_44_two_configs_on_one_lake_never_delete_what_the_other_reads(tmp_path, caplog):
    from service.ingest.billing import ingest
    from service.ingest.rollups import rollup

    export, base = focus_setup(tmp_path)
    first, second = (parse_config({**base, "attribution": a}) for a in ATTRIBUTIONS)
    lake = Lake.of(first)
    assert not ingest(first).failed
    assert rollup(second).built == 2  # `spendlake rollup` with the other config: both periods
    both = rollup_files(lake.root)
    assert len(both) == 4
    assert rollup(first).removed == 0 and rollup(second).removed == 0 and rollup_files(lake.root) == both
    with caplog.at_level("INFO"):
        assert total(lake, second) == TOTALS["a"]
    assert "rolled up from the raw lines" not in caplog.text  # the second config reads its stored rollups

    from service.attribution.compute import RollupSession

    held = RollupSession(lake, second.attribution)  # a query of the second config, started before the re-ingest
    swap(export, bill(*BILLS["b"], NOW))
    assert not ingest(first).failed  # the first config's new version; both old ones are kept for the grace
    assert both < rollup_files(lake.root)
    [(_, cost)] = held.con.execute("SELECT currency, sum(billed) FROM attribution_rollups GROUP BY 1").fetchall()
    assert cost == TOTALS["a"]  # what the held query reads is still there
    assert total(lake, second) == TOTALS["b"]
    assert rollup(second).built == 2
    current = rollup_files(lake.root) - both
    assert len(current) == 4
    assert materialise(lake, first, grace=timedelta(0)).removed == 4  # past the grace: superseded deliveries go
    assert rollup_files(lake.root) == current  # the second config's current version stays
    assert materialise(lake, second, grace=timedelta(0)).removed == 0 and rollup_files(lake.root) == current


@pytest.mark.slow
def test_43_a_read_only_lake_answers_queries(tmp_path):
    from service.ingest.billing import ingest

    root = Path(tempfile.mkdtemp(prefix="spendlake-readonly-"))  # tmp_path is private to root
    try:
        root.chmod(0o755)
        _, base = focus_setup(root)
        base["lake"] = str(root / "lake")
        assert not ingest(parse_config({**base, "attribution": ATTRIBUTIONS[0]})).failed
        config = root / "other.yaml"  # another config: no stored rollups, rolled up in memory
        config.write_text(yaml.safe_dump({**base, "attribution": ATTRIBUTIONS[1]}))
        for path in [root, *root.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        before = {p: p.stat().st_mtime_ns for p in (root / "lake").rglob("*")}
        done = spendlake(config, "-v", "attribute", *EVERYTHING, "--format", "json", as_nobody=True)
        assert done.returncode == 0, done.stderr
        assert Decimal(json.loads(done.stdout)["totals"][0]["cost"]) == TOTALS["a"]
        assert "rolled up from the raw lines in memory" in done.stderr
        reports = root / "reports"  # outside the lake, writable by the reader
        reports.mkdir(mode=0o777)
        reports.chmod(0o777)
        for args in (["attribute", "--check"], ["status", "--format", "json"], ["rules", "run", "--dry-run"],
                     ["report", "--date", NOW.date().isoformat(), "--out", str(reports)]):
            done = spendlake(config, *args, as_nobody=True)
            assert done.returncode in (0, 1), args + [done.stdout + done.stderr]  # 1: findings
            assert "Traceback" not in done.stderr
        assert {p: p.stat().st_mtime_ns for p in (root / "lake").rglob("*")} == before
    finally:
        for path in [root, *root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(root)


@pytest.mark.slow
def test_43_metrics_and_the_api_of_the_service_write_nothing(tmp_path):
    from prometheus_client import CollectorRegistry

    from service.ingest.billing import ingest
    from service.serve.app import Api
    from service.serve.metrics import LakeCollector

    _, base = focus_setup(tmp_path)
    assert not ingest(parse_config({**base, "attribution": ATTRIBUTIONS[0]})).failed
    config = parse_config({**base, "attribution": ATTRIBUTIONS[1]})  # no stored rollups: rolled up in memory
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    api = Api(config, registry)
    lake = Path(config.lake)
    before = {p: p.stat().st_mtime_ns for p in lake.rglob("*")}
    answer = api.handle("/api/v1/attribute", {"since": ["2000-01-01"], "until": ["2100-01-01"]}, None)
    assert answer.status == 200 and Decimal(json.loads(answer.body)["totals"][0]["cost"]) == TOTALS["a"]
    page = api.handle("/metrics", {}, None)
    assert page.status == 200 and metric_values(page.body.decode(), "spendlake_lake_readable") == [1.0]
    assert api.handle("/api/v1/status", {}, None).status == 200
    assert {p: p.stat().st_mtime_ns for p in lake.rglob("*")} == before  # not a file added or touched
