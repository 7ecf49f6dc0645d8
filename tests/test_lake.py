"""The lake as the only writer: atomic replace per period, the ledger, the sandbox."""

from __future__ import annotations

import json
import os
import re
import socket
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from service.core.connection import isolated_connection
from service.core.errors import DataError, LakeBusyError
from service.core.lake import Lake
from service.core.schema import cost_select_list


def rows_relation(con, rows):
    """A canonical cost relation from (period_start, currency, billed, invoice) tuples."""
    values = ", ".join(f"(TIMESTAMP '{p}', '{c}', '{b}', '{i}')" for p, c, b, i in rows)
    select = cost_select_list({
        "BillingPeriodStart": "p", "ChargePeriodStart": "p", "BillingCurrency": "c",
        "BilledCost": "b", "EffectiveCost": "b", "InvoiceId": "nullif(i, '')",
    })
    return con.sql(f"SELECT {select} FROM (VALUES {values}) AS t(p, c, b, i)")


def totals(lake: Lake):
    return lake.query().execute(
        "SELECT billing_period, BillingCurrency, sum(BilledCost) FROM costs GROUP BY ALL ORDER BY ALL").fetchall()


def test_13_a_commit_replaces_only_its_period_and_records_the_ledger(tmp_path):
    """DuckDB's `COPY ... PARTITION_BY ... OVERWRITE` deletes the whole target directory: a
    restated month must leave every other month, and every other source, byte for byte."""
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    lake.commit_costs(con, rows_relation(con, [("2026-11-01", "USD", "4", "INV9")]),
                      source="other", delivery_id="o1", periods=None)
    lake.commit_costs(con, rows_relation(con, [("2026-10-01", "USD", "10.5", "INV1"),
                                               ("2026-11-01", "USD", "1.25", ""),
                                               ("2026-11-01", "EUR", "2", "")]),
                      source="cur", delivery_id="d1", periods=None)
    costs = lake.root / "costs"
    kept = {path: path.read_bytes()
            for path in [*costs.glob("source=other/*/*"), *costs.glob("source=cur/*=2026-10/*")]}
    assert totals(lake) == [("2026-10", "USD", Decimal("10.5")), ("2026-11", "EUR", Decimal("2")),
                            ("2026-11", "USD", Decimal("5.25"))]
    # A restated November replaces November only; October stays.
    lake.commit_costs(con, rows_relation(con, [("2026-11-01", "USD", "-0.25", "INV2")]),
                      source="cur", delivery_id="d2", periods=("2026-11",))
    assert totals(lake) == [("2026-10", "USD", Decimal("10.5")), ("2026-11", "USD", Decimal("3.75"))]
    assert len(kept) == 2 and {path: path.read_bytes() for path in kept} == kept
    entries = {e.billing_period: e for e in lake.ledger() if e.source == "cur"}
    assert entries["2026-10"].final and entries["2026-11"].final
    assert entries["2026-11"].delivery_id == "d2" and entries["2026-10"].delivery_id == "d1"
    assert lake.has_delivery("cur", "d2", ["2026-11"]) and not lake.has_delivery("cur", "d2", ["2026-10"])
    assert not list(lake.staging.glob("costs-*"))


def test_exact_money_survives_large_and_small_values(tmp_path):
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    lake.commit_costs(con, rows_relation(con, [("2026-11-01", "USD", "1e16", ""), ("2026-11-01", "USD", "1", ""),
                                               ("2026-11-01", "USD", "-1e16", ""),
                                               ("2026-11-01", "USD", "1.81E-8", "")]),
                      source="cur", delivery_id="d1", periods=None)
    assert totals(lake) == [("2026-11", "USD", Decimal("1.0000000181"))]


def test_declared_period_without_rows_becomes_empty_and_foreign_rows_fail(tmp_path):
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    lake.commit_costs(con, rows_relation(con, [("2026-11-01", "USD", "3", "")]),
                      source="cur", delivery_id="d1", periods=None)
    lake.commit_costs(con, rows_relation(con, [("2026-11-01", "USD", "3", "")]).filter("false"),
                      source="cur", delivery_id="d2", periods=("2026-11",))
    assert totals(lake) == []
    with pytest.raises(DataError, match="2026-12"):
        lake.commit_costs(con, rows_relation(con, [("2026-12-01", "USD", "3", "")]),
                          source="cur", delivery_id="d3", periods=("2026-11",))
    assert lake.ledger_entry("cur", "2026-11").delivery_id == "d2"


@pytest.mark.parametrize("periods", [None, ("2026-11",)])  # partitioned and single-period staging
def test_rows_without_a_billing_period_fail(tmp_path, periods):
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    relation = rows_relation(con, [("2026-11-01", "USD", "3", "")])
    no_period = relation.project(", ".join("NULL::TIMESTAMP AS BillingPeriodStart" if c == "BillingPeriodStart" else c
                                           for c in relation.columns))
    with pytest.raises(DataError, match="invalid or missing BillingPeriodStart"):
        lake.commit_costs(con, relation.union(no_period), source="cur", delivery_id="d1", periods=periods)
    assert lake.ledger() == [] and not lake.has_table("costs")


def test_25_a_second_lock_holder_is_refused_with_the_pid_and_host_and_a_dead_holders_file_is_no_lock(tmp_path):
    """A lake on a shared volume is locked from several machines: 'pid 4242' alone sent the
    operator looking for a process that was on another host."""
    lake = Lake(tmp_path / "lake")
    (tmp_path / "lake" / "_locks").mkdir(parents=True)
    (tmp_path / "lake" / "_locks" / "ingest.lock").write_text("4242 on a-host-long-gone")  # its holder died
    with lake.lock("ingest"):
        held_by = rf"\(pid {os.getpid()} on {re.escape(socket.gethostname())} #[0-9a-f]{{12}}\)"
        with pytest.raises(LakeBusyError, match=held_by):
            with lake.lock("ingest"):
                pass


@pytest.mark.parametrize("announced_by", ["{pid} on {host}", "{pid} on {host} #0123456789ab"])
def test_25_a_crashed_commits_pending_entries_are_not_the_new_holders_of_the_same_pid_and_host(
        tmp_path, monkeypatch, announced_by):
    """A container restarted after a crash runs its new process under the same pid and hostname:
    the crashed commit's pending entries (its `pending_by` forged here, by a spendlake before the
    per-process token and after it) are abandoned, not a commit in flight readers wait for."""
    from service.core import snapshot

    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    monkeypatch.setattr(Lake, "record", lambda self, entries: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        lake.commit_costs(con, rows_relation(con, [("2026-10-01", "USD", "10.5", "INV1")]),
                          source="cur", delivery_id="d1", periods=None)
    monkeypatch.undo()
    ledger = json.loads(lake.ledger_file.read_text())
    assert ledger["pending"] and ledger["pending_by"].startswith(f"{os.getpid()} on {socket.gethostname()}")
    ledger["pending_by"] = announced_by.format(pid=os.getpid(), host=socket.gethostname())
    lake.ledger_file.write_text(json.dumps(ledger))
    with lake.lock("ingest"):  # the restarted process, same pid and host, holds the lock
        assert not snapshot._committing(lake, lake.ledger_state())
        ledger["pending_by"] = lake.lock_holder("ingest")  # its own commit is one in flight
        lake.ledger_file.write_text(json.dumps(ledger))
        assert snapshot._committing(lake, lake.ledger_state())


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('{root}/../x.parquet')",
    "COPY (SELECT 1) TO '/tmp/spendlake-escape.csv'",
    "SET enable_external_access = true",
    "SET allowed_directories = ['/']",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM read_text('/etc/passwd')",
    "ATTACH '{root}/../escape.db' AS escape",
    "COPY (SELECT 1) TO '{root}/../escape.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{root}/../escape'",
    "SET disabled_filesystems = ''",
])
@pytest.mark.parametrize("isolated", [False, True], ids=["query", "isolated"])
def test_query_connection_is_sandboxed_to_the_lake(tmp_path, sql, isolated):
    lake = Lake(tmp_path / "lake")
    con = isolated_connection() if isolated else lake.query()
    with pytest.raises(duckdb.Error, match="external access|configuration has been locked|not allowed|disabled"):
        con.execute(sql.format(root=lake.root))
    assert not list(tmp_path.glob("escape*"))


def test_every_duckdb_connection_is_opened_sandboxed():
    """An in-memory connection opened as DuckDB gives it reads and writes any file (and spills to
    `.tmp` in the working directory): every one goes through service/core/connection.py."""
    repo = Path(__file__).resolve().parent.parent
    opened = [str(path.relative_to(repo)) for folder in ("service", "connectors", "rules")
              for path in sorted((repo / folder).rglob("*.py"))
              for text in path.read_text().splitlines() if re.search(r"\bduckdb\.(connect|sql|execute|query)\(", text)]
    assert set(opened) == {"service/core/connection.py"}, opened


def test_partition_values_cannot_traverse(tmp_path):
    lake = Lake(tmp_path / "lake")
    for bad in ("../x", "a/../../x", "/abs", ""):
        with pytest.raises(DataError):
            lake.partition_file("costs", [("source", bad)])
