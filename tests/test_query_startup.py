"""What a query command loads and reads before it answers (issue 16, item 7: a team lead's
`spendlake attribute` answers in about a second, most of it start-up).

- The query commands import no Arrow or numpy (a quarter of a second of a process's start):
  only writers (ingest, rollup, export) stage through Arrow.
- A query reads each cost partition's Parquet footer once (the ledger check and the view's
  columns), with service/core/parquet_footer.py, which must agree with Arrow's reader.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import service.attribution
from service.core import integrity
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.ledger import LedgerEntry
from service.core.parquet_footer import read_footer
from service.ingest.billing import ingest
from tests.aws_exports import cur2_table, line, local_put, to_bytes, write_cur2

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("pyarrow", "numpy", "pandas")
# Runs one CLI command in a fresh interpreter, then prints the heavy packages it imported.
PROBE = f"""
import json, sys
from service.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="spendlake", standalone_mode=False)
finally:
    print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({list(HEAVY)!r}))), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def aws_lake(tmp_path_factory) -> Path:
    """A lake of one CUR 2.0 source over two months; returns its config file."""
    tmp = tmp_path_factory.mktemp("startup")
    con = duckdb.connect()
    for period, cost in (("2026-10", "2.5"), ("2026-11", "4")):
        body = to_bytes(con, cur2_table(con, [line(period, cost, team="pretrain")]), tmp, "parquet")
        write_cur2(local_put(tmp / "export"), prefix="exports", export="cur2", period=period, execution="e1",
                   parts=[body], fmt="parquet")
    document = {"lake": str(tmp / "lake"),
                "sources": [{"name": "cur2", "kind": "aws-cur2", "location": str(tmp / "export")}],
                "attribution": {"dimensions": {"team": {"tags": ["team"]}}}}
    ingest(parse_config(document))
    config = tmp / "spendlake.yaml"
    config.write_text(yaml.safe_dump(document))
    return config


@pytest.mark.parametrize("command", [
    ["attribute", "--since", "2026-10-01", "--until", "2026-12-01", "--by", "team", "--format", "json"],
    ["attribute", "--since", "2026-10-01", "--until", "2026-12-01", "--by", "team", "--explain", "--format", "json"],
    ["attribute", "--since", "2026-10-01", "--until", "2026-12-01", "--by", "team", "--check"],
    ["status"],
])
def test_a_query_command_imports_no_arrow(aws_lake, command):
    done = subprocess.run([sys.executable, "-c", PROBE, "--config", str(aws_lake), *command], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [], f"{command[0]} imported Arrow: {done.stderr}"
    if "--format" in command:
        assert json.loads(done.stdout)["rows"], done.stdout


def test_a_config_with_every_kind_queries_without_arrow(aws_lake, tmp_path):
    """A team lead's config names other bills and the cluster's job sources too: loading their
    connectors to check the config must not load Arrow (they load it to read their files)."""
    document = yaml.safe_load(aws_lake.read_text())
    document["sources"] += [{"name": kind, "kind": kind, "location": str(tmp_path / kind)}
                            for kind in ("focus", "azure-cost", "gcp-billing", "oci-cost", "aws-cur")]
    document["inventory"] = [
        {"name": "slurm", "kind": "slurm-jobs", "path": str(tmp_path / "sacct")},
        {"name": "jobs", "kind": "jobs-file", "path": str(tmp_path / "jobs")},
        {"name": "pods", "kind": "k8s-pods", "prometheus_url": "http://127.0.0.1:9"}]
    config = tmp_path / "with-jobs.yaml"
    config.write_text(yaml.safe_dump(document))
    command = ["attribute", "--since", "2026-10-01", "--until", "2026-12-01", "--by", "team", "--format", "json"]
    done = subprocess.run([sys.executable, "-c", PROBE, "--config", str(config), *command], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [], f"imported Arrow: {done.stderr}"


def test_a_budget_of_a_whole_amount_loads_no_currency_table(aws_lake, tmp_path):
    """A budget's amount is checked against its currency's minor unit (Babel's CLDR tables, ~10 ms
    to load); no minor unit is above 1, so a query's JSON never loads them for a whole amount. (A budget in
    another currency than the default USD loads Babel's list once, for its ISO 4217 check at load.)"""
    document = yaml.safe_load(aws_lake.read_text())
    document["budgets"] = [{"name": "pretrain-gpu", "value": "pretrain", "amount": 250000, "currency": "USD"}]
    config = tmp_path / "with-budget.yaml"
    config.write_text(yaml.safe_dump(document))
    probe = PROBE.replace(repr(list(HEAVY)), repr(["babel"]))
    command = ["attribute", "--since", "2026-10-01", "--until", "2026-12-01", "--by", "team", "--format", "json"]
    done = subprocess.run([sys.executable, "-c", probe, "--config", str(config), *command], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [], done.stderr


def test_a_query_builds_no_validator_of_the_state_files_it_does_not_read(aws_lake):
    """The `_state/*.json` shapes (service/core/state_files.py, ~20 models) are built on their first
    read (defer_build), not at import: a query reads none of the scheduler's or the metrics'."""
    probe = ("import json, sys\nfrom service.cli.main import cli\n"
             "cli(sys.argv[1:], prog_name='spendlake', standalone_mode=False)\n"
             "from service.core.state_files import DailyRun, FileDigest, StoredFamily, StoredGroup\n"
             "print(json.dumps([m.__pydantic_complete__ for m in (DailyRun, FileDigest, StoredFamily, StoredGroup)]),"
             " file=sys.stderr)\n")
    command = ["attribute", "--since", "2026-10-01", "--until", "2026-12-01", "--by", "team", "--format", "json"]
    done = subprocess.run([sys.executable, "-c", probe, "--config", str(aws_lake), *command], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [False] * 4, done.stderr


OTHER_COMMANDS = """
import json, sys
from service.cli.main import AREA_COMMANDS, cli
try:
    cli(sys.argv[1:], prog_name="spendlake", standalone_mode=False)
finally:
    ran = {AREA_COMMANDS[sys.argv[3]][0]} if sys.argv[3] in AREA_COMMANDS else set()
    print(json.dumps(sorted({module for module, _ in AREA_COMMANDS.values()} - ran & set(sys.modules))), file=sys.stderr)
"""


@pytest.mark.parametrize("command", [
    ["attribute", "--since", "2026-10-01", "--until", "2026-12-01", "--by", "team", "--format", "json"],
    ["status", "--format", "json"],
])
def test_a_command_imports_no_other_commands_module(aws_lake, command):
    """Each area command's module is loaded when it runs: `attribute` loaded `runs`' (the
    report's cluster section, the run stories) and every other's, ~0.03 CPU s of each start."""
    done = subprocess.run([sys.executable, "-c", OTHER_COMMANDS, "--config", str(aws_lake), *command], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [], done.stderr


def test_a_query_reads_each_partition_footer_once(aws_lake, monkeypatch):
    reads: list[str] = []

    def counted(path):
        reads.append(str(path))
        return read_footer(path)

    monkeypatch.setattr(integrity, "read_footer", counted)
    lake = Lake.of(parse_config(yaml.safe_load(aws_lake.read_text())))
    con = lake.query()
    assert con.execute("SELECT sum(BilledCost) FROM costs").fetchone()[0] == 6.5
    assert len(reads) == 2 and len(set(reads)) == 2  # two partitions, one read each


def test_every_public_attribution_name_is_not_also_a_module_name():
    """A lazily imported name that is also a module's (service.attribution.runs once) is
    shadowed by the module as soon as something imports it."""
    homes = service.attribution._MODULES
    assert not set(service.attribution.__all__) & set(homes)
    for name in service.attribution.__all__:
        assert not isinstance(getattr(service.attribution, name), type(sys))


def arrow_footer(path: Path) -> tuple[int, tuple[str, ...]]:
    return pq.ParquetFile(path).metadata.num_rows, tuple(pq.read_schema(path).names)


def test_the_footer_reader_agrees_with_arrow(tmp_path):
    nested = pa.table({
        "id": pa.array(range(300), pa.int64()),
        "Tags": pa.array([[("k", str(i))] for i in range(300)], pa.map_(pa.string(), pa.string())),
        "parts": pa.array([[i, i + 1] for i in range(300)], pa.list_(pa.int32())),
        "point": pa.array([{"x": 1.5, "y": {"z": True}}] * 300,
                          pa.struct([("x", pa.float64()), ("y", pa.struct([("z", pa.bool_())]))])),
        "ünïcode name": pa.array(["a"] * 300),
        "flag": pa.array([True, False, None] * 100),
    })
    files = {"nested": tmp_path / "nested.parquet", "row groups": tmp_path / "groups.parquet",
             "empty": tmp_path / "empty.parquet", "duckdb": tmp_path / "duckdb.parquet"}
    pq.write_table(nested, files["nested"])
    pq.write_table(nested, files["row groups"], row_group_size=7)  # many row groups before the end
    pq.write_table(nested.slice(0, 0), files["empty"])
    duckdb.sql("COPY (SELECT range AS n, MAP {'a': 'b'} AS m, [1, 2] AS l FROM range(5000)) TO "
               f"'{files['duckdb']}' (FORMAT parquet, ROW_GROUP_SIZE 1000)")
    for name, path in files.items():
        footer = read_footer(path)
        assert footer is not None, name
        assert (footer.rows, footer.columns) == arrow_footer(path), name


def test_36_a_file_without_a_readable_footer_reads_as_none(tmp_path):
    """RELIABILITY 36: the quick check calls such a partition truncated, never a traceback."""
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), good)
    data = good.read_bytes()
    cases = {
        "truncated": data[:-20],
        "no magic": data[:-4] + b"XXXX",
        "too short": b"PAR1",
        "length beyond the file": data[:-8] + (10 ** 6).to_bytes(4, "little") + b"PAR1",
        "garbage footer": data[:4] + b"\xff" * 64 + (64).to_bytes(4, "little") + b"PAR1",
        "not parquet": b"a,b\n1,2\n" * 10,
    }
    for name, body in cases.items():
        path = tmp_path / f"{name}.parquet"
        path.write_bytes(body)
        assert read_footer(path) is None, name
    assert read_footer(tmp_path / "missing.parquet") is None


def test_a_query_connection_caches_footers_but_sees_a_replaced_partition(tmp_path):
    """Query connections keep DuckDB's Parquet metadata cache (each bind of `costs` parsed
    every footer again); a partition a commit replaces (os.replace) is read anew."""
    lake = Lake(tmp_path / "lake")
    path = lake.root / "t" / "data.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"n": list(range(10))}), path)
    con = lake.query()
    assert con.execute("SELECT current_setting('parquet_metadata_cache')").fetchone()[0] is True
    count = "SELECT count(*), sum(n) FROM read_parquet(?)"
    assert con.execute(count, [str(path)]).fetchone() == (10, 45)
    staged = path.with_name("staged.parquet")
    pq.write_table(pa.table({"n": list(range(1000))}), staged, row_group_size=100)
    os.replace(staged, path)
    assert con.execute(count, [str(path)]).fetchone() == (1000, 499500)


def test_36_a_partition_whose_footer_is_overwritten_in_place_is_truncated_for_the_quick_check(tmp_path):
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    entry = LedgerEntry("bill", "2026-11", "d1", 3, (), True, "2026-12-01T00:00:00Z", size=path.stat().st_size)
    assert integrity.quick_check(path, entry).ok
    assert integrity.quick_check(path, entry).columns == ("a",)
    data = bytearray(path.read_bytes())
    length = int.from_bytes(data[-8:-4], "little")
    data[-8 - length:-8] = b"\x00" * length  # the same size, the footer zeroed: a STOP before any field
    path.write_bytes(bytes(data))
    check = integrity.quick_check(path, entry)
    assert (check.state, check.detail) == ("truncated", "no readable Parquet footer")
