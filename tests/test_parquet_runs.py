"""A delivery's Parquet files with one schema are staged through one read (RELIABILITY 40, 46).

Consecutive Parquet files of a FOCUS or GCP delivery whose footers give the same schema and
whose Hive folders the same keys are one relation (connectors.folder_export): DuckDB plans
the read once instead of once per file. The lake must hold exactly what reading each file
alone stored (rows, values, ledger, the periods remembered per file), a bad value must name
its own file (JSON-text tags too, which the stager converts per distinct value), a file that
cannot be opened fails alone as before, and files of another schema are runs of their own."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from billing_helpers import failures
from layout_exports import focus, gcp

from connectors.folder_export import FolderExport, same_schema_runs
from service.core import commit
from service.core.config import parse_config
from service.core.file_parts import FilesPart
from service.core.lake import Lake
from service.core.ledger_file import entry_json
from service.core.per_value import PerValuePart
from service.ingest.billing import IngestResult, ingest

HIVE_FILES = {  # two periods, a file holding both, Hive values (a NULL, an escaped one, a leading zero)
    "SubAccountId=000123/part-0.parquet": [("2024-05", "USD", "1.10"), ("2024-05", "EUR", "2.20")],
    "SubAccountId=000123/part-1.parquet": [("2024-06", "USD", "5.000000000001")],
    "SubAccountId=__HIVE_DEFAULT_PARTITION__/part-0.parquet": [("2024-05", "USD", "0.30")],
    "SubAccountId=a%2Fb/part-0.parquet": [("2024-05", "USD", "0.005"), ("2024-06", "USD", "7")],
    "SubAccountId=999/part-0.parquet": [("2024-07", "USD", "4")],
}


def write_export(root: Path, files: dict[str, list], writer=focus) -> Path:
    for name, rows in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        writer(root / name, rows)
    return root


def run(lake: Path, location: Path, kind: str = "focus") -> IngestResult:
    return ingest(parse_config({"lake": str(lake), "sources": [{"name": "src", "kind": kind,
                                                                "location": str(location)}]}))


def record_parts(monkeypatch) -> list[list]:
    """The parts of each delivery staged, as the stager gets them."""
    seen: list[list] = []
    stage_parts = commit.stage_parts

    def recording(con, parts, stage, prints=""):
        seen.append(list(parts))
        return stage_parts(con, parts, stage, prints)

    monkeypatch.setattr(commit, "stage_parts", recording)
    return seen


def lake_digest(root: Path) -> dict:
    """What a lake holds, row order aside: per partition its rows and the sum of their row
    hashes, the ledger (without what differs per write: time, bytes, SHA-256, and ids) and the
    periods ingest remembers per file."""
    lake = Lake(root)
    files = sorted(root.glob("costs/**/*.parquet"))
    rows = {str(f.relative_to(root)): duckdb.execute(
        "SELECT count(*), sum(hash(t)::HUGEINT), sum(BilledCost) FROM read_parquet(?, hive_partitioning = false) t",
        [str(f)]).fetchall() for f in files}
    entries = lake.ledger()
    # delivery ids fingerprint each file's inode and ctime: which periods share one is what must match
    sharing = {e.delivery_id: tuple(sorted(o.billing_period for o in entries if o.delivery_id == e.delivery_id))
               for e in entries}
    written = ("sha256", "size", "mtime_ns", "ingested_at", "delivered_at")  # delivered_at: the files' write time
    ledger = [{**{k: v for k, v in entry_json(e).items() if k not in written},
               "delivery_id": sharing[e.delivery_id]} for e in entries]
    for entry in ledger:  # what a restated delivery replaced (finance41) was committed at its own second too
        if "replaced" in entry:
            entry["replaced"] = {k: v for k, v in entry["replaced"].items() if k not in (*written, "delivery_id")}
    known = json.loads((root / "_state" / "file_periods.json").read_text())
    # a file's version fingerprints its write (size, times, inode: sec42 tells a moved file by them)
    state = {source: sorted(({k: v for k, v in f.items() if k != "version"} for f in files.values()),
                            key=lambda f: f["uri"]) for source, files in known.items()}
    return {"rows": rows, "ledger": ledger, "state": state}


def each_file_alone(monkeypatch) -> None:
    monkeypatch.setattr(FolderExport, "reads_runs", False)


def test_46_a_hive_delivery_of_one_schema_is_staged_through_one_read(tmp_path, monkeypatch):
    export = write_export(tmp_path / "export", HIVE_FILES)
    staged = record_parts(monkeypatch)
    result = run(tmp_path / "lake", export)
    assert failures(result) == []
    [parts] = staged  # a first ingest: the five new files in one pass
    assert len(parts) == 1 and isinstance(parts[0], FilesPart) and parts[0].files == 5


@pytest.mark.parametrize(("kind", "writer"), [("focus", focus), ("gcp-billing", gcp)])
def test_40_one_read_of_the_files_stores_what_reading_each_alone_stores(tmp_path, monkeypatch, kind, writer):
    """A first ingest (one pass over every new file), then files added to a period (the survey
    and a joined delivery of several files): the same lake either way, at every step."""
    files = HIVE_FILES if kind == "focus" else {name.replace("SubAccountId", "project"): rows
                                                for name, rows in HIVE_FILES.items()}
    later = {"SubAccountId=000123/part-2.parquet": [("2024-05", "USD", "0.25")],
             "SubAccountId=777/part-0.parquet": [("2024-06", "EUR", "9.5")]}
    digests = []
    for alone in (False, True):
        if alone:
            each_file_alone(monkeypatch)
        shutil.rmtree(tmp_path / "export", ignore_errors=True)  # the same URIs in both lakes
        export = write_export(tmp_path / "export", files, writer)
        lake = tmp_path / f"lake-{alone}"
        assert failures(run(lake, export, kind)) == []
        first = lake_digest(lake)
        write_export(export, later if kind == "focus" else {n.replace("SubAccountId", "project"): r
                                                            for n, r in later.items()}, writer)
        assert failures(run(lake, export, kind)) == []
        digests.append((first, lake_digest(lake)))
    assert digests[0] == digests[1]
    assert len(digests[0][1]["ledger"]) == 3 and sum(n for [(n, _, _)] in digests[0][1]["rows"].values()) == 9
    if kind == "focus":
        lake = Lake(tmp_path / "lake-False")
        assert sorted(lake.query().execute("SELECT DISTINCT SubAccountId FROM costs").fetchall(),
                      key=str) == sorted([("000123",), (None,), ("a/b",), ("999",), ("777",)], key=str)


def text_money(path: Path, costs: list[str]) -> None:
    """FOCUS Parquet whose BilledCost is text, as some writers leave it."""
    pq.write_table(pa.table({
        "BilledCost": costs, "BillingCurrency": ["USD"] * len(costs),
        "BillingPeriodStart": pa.array([datetime(2024, 5, 1, tzinfo=timezone.utc)] * len(costs),
                                       pa.timestamp("us", "UTC")),
        "ChargePeriodStart": pa.array([datetime(2024, 5, 3, tzinfo=timezone.utc)] * len(costs),
                                      pa.timestamp("us", "UTC")),
    }), path)


def test_40_a_bad_value_in_the_middle_file_names_that_file(tmp_path, monkeypatch):
    """The one read fails naming the file and value, as the read of that file alone did."""
    said = []
    for alone in (False, True):
        if alone:
            each_file_alone(monkeypatch)
        shutil.rmtree(tmp_path / "export", ignore_errors=True)
        export = tmp_path / "export"
        for account, costs in (("1", ["1.5", "2"]), ("2", ["3", "abc"]), ("3", ["4"])):
            (export / f"SubAccountId={account}").mkdir(parents=True)
            text_money(export / f"SubAccountId={account}" / "part-0.parquet", costs)
        staged = record_parts(monkeypatch)
        result = run(tmp_path / f"lake-{alone}", export)
        assert isinstance(staged[0][0], FilesPart) != alone
        said.append(failures(result))
    bad = str(export / "SubAccountId=2" / "part-0.parquet")
    assert any(f"{bad}: column BilledCost: not a number: abc" in text for text in said[0]), said[0]
    assert said[0] == said[1]


@pytest.mark.parametrize("damage", ["truncate", "empty", "flip"])
def test_40_a_damaged_file_in_the_middle_fails_alone_as_before(tmp_path, monkeypatch, damage):
    """A footer that cannot be read: every file is opened alone; damaged pages: the one read
    fails naming the file (DuckDB's message). Either way ingest says exactly what it said when
    each file was a part of its own."""
    outcomes = []
    for alone in (False, True):
        if alone:
            each_file_alone(monkeypatch)
        shutil.rmtree(tmp_path / "export", ignore_errors=True)
        export = write_export(tmp_path / "export", HIVE_FILES)
        bad = export / "SubAccountId=000123" / "part-1.parquet"
        data = bad.read_bytes()
        bad.write_bytes({"empty": b"", "truncate": data[:-40],
                         "flip": data[:4] + bytes(b ^ 0xFF for b in data[4:len(data) // 2]) + data[len(data) // 2:]}[damage])
        result = run(tmp_path / f"lake-{alone}", export)
        text = [line.replace(str(export), "EXPORT") for o in result.outcomes for line in o.lines()]
        outcomes.append((sorted(text), lake_digest(tmp_path / f"lake-{alone}")))
    assert outcomes[0] == outcomes[1]
    assert any("EXPORT/SubAccountId=000123/part-1.parquet" in line and "FAILED" in line.upper()
               for line in outcomes[0][0]), outcomes[0][0]


def test_40_files_of_other_schemas_are_runs_of_their_own(tmp_path, monkeypatch):
    export = tmp_path / "export"
    names = ["a", "b", "c", "d", "e"]
    for name in names:
        (export / f"SubAccountId={name}").mkdir(parents=True)
        focus(export / f"SubAccountId={name}" / "part.parquet", [("2024-05", "USD", "1")])
    path_c = export / "SubAccountId=c" / "part.parquet"  # another column, then another type
    pq.write_table(pq.read_table(path_c).append_column("RegionId", [["eu"]]), path_c)
    path_e = export / "SubAccountId=e" / "part.parquet"
    table = pq.read_table(path_e)
    pq.write_table(table.set_column(0, "BilledCost", table.column("BilledCost").cast(pa.decimal128(20, 4))), path_e)
    shutil.copytree(export / "SubAccountId=d", export / "Other=x" / "SubAccountId=d")  # another Hive key
    paths = sorted(export.rglob("*.parquet"))
    uris = [str(p) for p in paths]
    runs = same_schema_runs(duckdb.connect(), paths, uris)
    by_folder = [[str(Path(u).relative_to(export).parent) for u in run] for run in runs]
    assert by_folder == [["Other=x/SubAccountId=d"], ["SubAccountId=a", "SubAccountId=b"], ["SubAccountId=c"],
                         ["SubAccountId=d"], ["SubAccountId=e"]]
    digests = []
    for alone in (False, True):
        if alone:
            each_file_alone(monkeypatch)
        assert failures(run(tmp_path / f"lake-{alone}", export)) == []
        digests.append(lake_digest(tmp_path / f"lake-{alone}"))
    assert digests[0] == digests[1]
    # Other=x/SubAccountId=d holds SubAccountId=d's rows (no FOCUS column reads `Other`): a copy, read once
    assert Lake(tmp_path / "lake-False").query().execute("SELECT sum(BilledCost), count(RegionId) FROM costs"
                                                         ).fetchall() == [(Decimal(5), 1)]


def tagged_export(root: Path, tags: list[str | None]) -> Path:
    """FOCUS Parquet Hive-partitioned by hour, one row a file, Tags as JSON text (as Azure's
    FOCUS Parquet has them): the stager converts them per distinct value."""
    for number, text in enumerate(tags):
        path = root / f"hr=20240501{number:02d}" / "part-0.parquet"
        path.parent.mkdir(parents=True)
        focus(path, [("2024-05" if number % 3 else "2024-06", "USD", f"{number}.25")])
        pq.write_table(pq.read_table(path).append_column("Tags", pa.array([text], pa.string())), path)
    return root


def test_46_files_with_json_tags_are_staged_through_one_read_as_each_alone(tmp_path, monkeypatch):
    tags = [None if n == 5 else json.dumps({"team": f"t{n % 4}", **({"env": "prod"} if n % 2 else {})})
            for n in range(30)]
    digests = []
    for alone in (False, True):
        if alone:
            each_file_alone(monkeypatch)
        shutil.rmtree(tmp_path / "export", ignore_errors=True)  # the same URIs in both lakes
        staged = record_parts(monkeypatch)
        assert failures(run(tmp_path / f"lake-{alone}", tagged_export(tmp_path / "export", tags))) == []
        digests.append(lake_digest(tmp_path / f"lake-{alone}"))
        if not alone:
            [parts] = staged  # a first ingest: every new file in one pass
    assert len(parts) == 1 and isinstance(parts[0], FilesPart) and parts[0].files == 30
    assert isinstance(parts[0].rows, PerValuePart) and list(parts[0].rows.per_value) == ["Tags"]
    assert digests[0] == digests[1]
    counts = Lake(tmp_path / "lake-False").query().execute(
        "SELECT count(*) FILTER (Tags['team'] = 't1'), count(*) FILTER (Tags['env'] = 'prod'), count(Tags) FROM costs")
    assert counts.fetchall() == [(7, 14, 29)]  # file 5 has no tags


def test_40_a_bad_json_tag_in_the_middle_file_names_that_file(tmp_path, monkeypatch):
    """The tags' SQL, run once per distinct text for the whole run of files, names a file
    holding a bad text: what reading that file alone said, word for word. The run's read does
    not keep file order, so of two files holding it either may be named."""
    tags = ['{"team": "a"}'] * 24
    tags[11] = tags[19] = '{"team": oops}'  # the same bad text in two files
    said = []
    for alone in (False, True):
        if alone:
            each_file_alone(monkeypatch)
        shutil.rmtree(tmp_path / "export", ignore_errors=True)
        staged = record_parts(monkeypatch)
        result = run(tmp_path / f"lake-{alone}", tagged_export(tmp_path / "export", tags))
        assert isinstance(staged[0][0], FilesPart) != alone
        said.append(failures(result))
    first, second = (str(tmp_path / "export" / f"hr=20240501{n}" / "part-0.parquet") for n in (11, 19))
    error = ": column Tags: not a JSON object with unique keys: " + tags[11]
    assert any(f"{first}{error}" in text for text in said[1]), said  # file by file, in order: the first
    named = [bad for bad in (first, second) if any(f"{bad}{error}" in text for text in said[0])]
    assert len(named) == 1, said
    assert [text.replace(f"{named[0]}{error}", f"{first}{error}") for text in said[0]] == said[1]


def test_40_a_bad_text_time_in_the_middle_file_names_that_file(tmp_path, monkeypatch):
    """Times given as text (parsed by the stager once per distinct text for the whole run) name a
    file holding a bad one, as reading that file alone did."""
    said = []
    for alone in (False, True):
        if alone:
            each_file_alone(monkeypatch)
        shutil.rmtree(tmp_path / "export", ignore_errors=True)
        root = tagged_export(tmp_path / "export", ['{"team": "a"}'] * 24)
        for number in range(24):
            path = root / f"hr=20240501{number:02d}" / "part-0.parquet"
            table = pq.read_table(path)
            text = "June 2nd" if number == 11 else "2024-05-03T00:00:00Z"
            place = table.schema.get_field_index("ChargePeriodStart")
            pq.write_table(table.set_column(place, "ChargePeriodStart", pa.array([text], pa.string())), path)
        staged = record_parts(monkeypatch)
        result = run(tmp_path / f"lake-{alone}", root)
        if not alone:
            part = staged[0][0]
            assert isinstance(part, FilesPart) and list(part.rows.per_value) == ["ChargePeriodStart", "Tags"]
        said.append(failures(result))
    bad = str(tmp_path / "export" / "hr=2024050111" / "part-0.parquet")
    assert any(f"{bad}: column ChargePeriodStart: not a date/time: June 2nd" in text for text in said[1]), said
    assert said[0] == said[1]
