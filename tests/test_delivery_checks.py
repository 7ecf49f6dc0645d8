"""No silent guesses about a delivery's shape (RELIABILITY 56): a header-only file says
"0 rows"; a line item repeated in a delivery warns (`--strict` fails it); a cost column
present twice fails naming both."""

from __future__ import annotations

import csv
import io
import json

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from aws_exports import LEGACY_COLUMNS, cur2_table, legacy_csv, line, local_put, to_bytes, write_cur2
from conftest import SAMPLES
from service.cli.main import cli
from service.core import line_repeats
from service.core.hidden_columns import LINE_ITEM_KEY

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
AZURE = SAMPLES / "azure" / "ea_actual_anonymous_sample.csv"  # the newer EA header
WITH_INTERVAL = [*LEGACY_COLUMNS, "identity/TimeInterval"]
DAY1, DAY2 = "2026-10-02T00:00:00Z/2026-10-03T00:00:00Z", "2026-10-03T00:00:00Z/2026-10-04T00:00:00Z"


def ingest(tmp_path, kind, location, *flags):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                      "sources": [{"name": "bill", "kind": kind, "location": str(location)}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest", *flags])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def state(tmp_path) -> dict:
    path = tmp_path / "lake" / "_state" / "sources.json"
    return json.loads(path.read_text())["bill"] if path.exists() else {}


def sample_rows(path=FOCUS, count=20) -> list[list[str]]:
    return list(csv.reader(path.open(encoding="utf-8-sig")))[:count + 1]


def write_csv(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


@pytest.mark.parametrize("kind", ["focus", "aws-cur"])
def test_56_a_header_only_file_says_0_rows(tmp_path, kind):
    export = tmp_path / "export" / "bill.csv"
    if kind == "focus":
        write_csv(export, sample_rows()[:1])
    else:
        export.parent.mkdir(parents=True)
        export.write_bytes(legacy_csv([]))
    result = ingest(tmp_path, kind, export.parent)
    assert result.exit_code == 0, result.output
    assert f"bill {export}: 0 rows" in result.output
    assert "last_success" in state(tmp_path) and not (tmp_path / "lake" / "costs").exists()


def repeated_legacy_rows() -> list[dict]:
    rows = []
    for item, interval, cost in [("A", DAY1, "1"), ("B", DAY1, "2"), ("A", DAY1, "1"), ("A", DAY2, "1"),
                                 ("C", DAY1, "3"), ("C", DAY1, "3"), ("C", DAY1, "3")]:
        row = line(cost=cost)
        row.update({"identity/LineItemId": item, "identity/TimeInterval": interval})
        rows.append(row)
    return rows


def test_56_a_line_item_repeated_in_a_delivery_warns_with_the_count_and_the_first_ids(tmp_path):
    export = tmp_path / "export" / "cur.csv"
    export.parent.mkdir()
    export.write_bytes(legacy_csv(repeated_legacy_rows(), WITH_INTERVAL))
    result = ingest(tmp_path, "aws-cur", export.parent)
    assert result.exit_code == 0, result.output
    assert "bill 2026-10: committed 7 rows USD 14" in result.output
    [warning] = [w for w in result.output.splitlines() if w.startswith("warning: ")]
    # A at DAY2 is another line item: the id repeats across hours and days in every real CUR
    assert (f"2 line item id(s) appear more than once (3 extra row(s)): A ({DAY1}), C ({DAY1}); the rows are kept "
            "and summed") in warning and str(export) in warning


def test_56_strict_fails_the_period_and_commits_nothing(tmp_path):
    export = tmp_path / "export" / "cur.csv"
    export.parent.mkdir()
    export.write_bytes(legacy_csv(repeated_legacy_rows(), WITH_INTERVAL))
    result = ingest(tmp_path, "aws-cur", export.parent, "--strict")
    assert result.exit_code == 3, result.output
    [failed] = [f for f in result.output.splitlines() if "FAILED" in f]
    assert f"2 line item id(s) appear more than once (3 extra row(s)): A ({DAY1}), C ({DAY1})" in failed
    assert not (tmp_path / "lake" / "_ledger").exists() and state(tmp_path)["failures_total"] == 1
    unique = [row for row in repeated_legacy_rows() if row["identity/LineItemId"] == "B"]
    export.write_bytes(legacy_csv(unique, WITH_INTERVAL))
    assert ingest(tmp_path, "aws-cur", export.parent, "--strict").exit_code == 0


def test_56_a_line_item_repeated_across_the_parts_of_a_cur2_delivery(tmp_path):
    con = duckdb.connect()
    parts = [to_bytes(con, cur2_table(con, rows), tmp_path, "parquet")
             for rows in ([line(cost="5"), line(cost="6")], [line(cost="5")])]
    write_cur2(local_put(tmp_path / "export"), prefix="", export="cur2", period="2026-10", execution="e1",
               parts=parts, fmt="parquet")
    result = ingest(tmp_path, "aws-cur2", tmp_path / "export")
    assert result.exit_code == 0 and "committed 3 rows USD 16" in result.output
    assert "warning: " in result.output and "1 line item id(s) appear more than once (1 extra row(s)): " \
        "li-2026-10-5-Usage" in result.output
    (tmp_path / "again").mkdir()
    strict = ingest(tmp_path / "again", "aws-cur2", tmp_path / "export", "--strict")
    assert strict.exit_code == 3 and "li-2026-10-5-Usage" in strict.output


def test_56_a_cur2_export_without_the_time_interval_column_tells_line_items_by_their_usage_window(tmp_path):
    # a CUR 2.0 query may leave identity_time_interval out: a daily export's ids then "repeated"
    # on every day after the first (a warning on every ingest, --strict failing every period)
    def on(day, cost="1"):
        row = line(cost=cost)
        row.update({"identity/LineItemId": "A", "lineItem/UsageStartDate": f"2026-10-0{day}T00:00:00Z",
                    "lineItem/UsageEndDate": f"2026-10-0{day + 1}T00:00:00Z"})
        return row

    con = duckdb.connect()
    write_cur2(local_put(tmp_path / "export"), prefix="", export="cur2", period="2026-10", execution="e1",
               parts=[to_bytes(con, cur2_table(con, [on(1), on(2), on(3)]), tmp_path, "parquet")], fmt="parquet")
    result = ingest(tmp_path, "aws-cur2", tmp_path / "export", "--strict")
    assert result.exit_code == 0 and "committed 3 rows USD 3" in result.output, result.output
    write_cur2(local_put(tmp_path / "export"), prefix="", export="cur2", period="2026-10", execution="e2",
               parts=[to_bytes(con, cur2_table(con, [on(1), on(2), on(2)]), tmp_path, "parquet")], fmt="parquet")
    result = ingest(tmp_path, "aws-cur2", tmp_path / "export")
    assert "1 line item id(s) appear more than once (1 extra row(s)): A (2026-10-02 00:00:00/2026-10-03 00:00:00)" \
        in result.output, result.output


def focus_twice(header: list[str], second: str) -> list[list[str]]:
    rows = sample_rows()
    return [rows[0] + [second]] + [row + ["999"] for row in rows[1:]]


def legacy_twice(second: str) -> bytes:
    text = legacy_csv([line(cost="1"), line(cost="2")]).decode().splitlines()
    return ("\n".join([text[0] + f",{second}"] + [row + ",999" for row in text[1:]]) + "\n").encode()


def azure_with_both() -> list[list[str]]:
    rows = sample_rows(AZURE)
    return [rows[0] + ["Cost"]] + [row + ["999"] for row in rows[1:]]


CASES = [  # (kind, file name, content, what the message names)
    ("focus", "bill.csv", lambda: focus_twice(sample_rows()[0], "BilledCost"),
     "the cost column 'BilledCost' is present twice: column 2 ('BilledCost') and column 45 ('BilledCost')"),
    ("focus", "bill.csv", lambda: focus_twice(sample_rows()[0], "billedcost"),
     "column 2 ('BilledCost') and column 45 ('billedcost')"),
    ("aws-cur", "cur.csv", lambda: legacy_twice("lineItem/UnblendedCost"),
     "the cost column line_item_unblended_cost is present 2 times: 'lineItem/UnblendedCost' and "
     "'lineItem/UnblendedCost'"),
    ("aws-cur", "cur.csv", lambda: legacy_twice("line_item_unblended_cost"),
     "'lineItem/UnblendedCost' and 'line_item_unblended_cost'"),
    ("azure-cost", "cost.csv", azure_with_both, "the value is in two columns: 'CostInBillingCurrency' and 'Cost'"),
]


@pytest.mark.parametrize("kind, name, content, named", CASES, ids=[c[3][-40:] for c in CASES])
def test_56_a_cost_column_present_twice_fails_the_period_naming_both(tmp_path, kind, name, content, named):
    export = tmp_path / "export" / name
    data = content()
    if isinstance(data, bytes):
        export.parent.mkdir(parents=True)
        export.write_bytes(data)
    else:
        write_csv(export, data)
    result = ingest(tmp_path, kind, export.parent)
    assert result.exit_code == 3, result.output
    [failed] = [f for f in result.output.splitlines() if "FAILED" in f]
    assert named in failed and str(export) in failed and "does not guess" in failed
    assert not (tmp_path / "lake" / "_ledger").exists()


def test_56_the_samples_raise_no_repeat_and_no_twice_named_column(tmp_path):
    export = tmp_path / "export" / "cur.csv"
    export.parent.mkdir(parents=True)
    export.write_bytes((SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv").read_bytes())
    result = ingest(tmp_path, "aws-cur", export.parent, "--strict")
    assert result.exit_code == 0 and "warning" not in result.output, result.output
    assert io.StringIO(result.output).read().count("committed") >= 1


def test_56_line_items_whose_hashes_collide_are_not_repeats(tmp_path):
    """Repeats are looked for by hash(id, interval) first, then confirmed on the id and interval."""
    line_item, interval = LINE_ITEM_KEY
    con = duckdb.connect()
    con.sql(f"SELECT * FROM (VALUES ('A', '{DAY1}', 7::UBIGINT), ('B', '{DAY1}', 7::UBIGINT), "
            f"('C', '{DAY1}', 9::UBIGINT), ('C', '{DAY1}', 9::UBIGINT), ('D', NULL, NULL), ('D', NULL, NULL)) "
            f"t({line_item}, {interval}, {line_repeats.LINE_ITEM_HASH})").write_parquet(str(tmp_path / line_repeats.LINE_ITEMS_FILE))
    assert str(line_repeats.find_repeats(con, tmp_path)) == f"1 line item id(s) appear more than once (1 extra row(s)): C ({DAY1})"
