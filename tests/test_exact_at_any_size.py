"""Exact at any size (RELIABILITY 45): costs with 18 decimals near 1e19 give the same total in
`status` and `attribute` and reconcile to the last decimal; a period whose sum would overflow
the lake's DECIMAL(38,12) fails at ingest, named, and nothing of it is committed."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb
import yaml
from click.testing import CliRunner

from service.cli.main import cli

BIG = ["12000000000000000000.123456789012345678", "0.000000000000500001", "7.100000000000000009",
       "-3.999999999999499999"]
TAX = "1000000000000000000.333333333333333333"  # shared by team, in proportion: products of 38-digit numbers
WINDOW = ["--since", "2026-11-01", "--until", "2026-12-01"]


def focus_parquet(path: Path, costs: list[tuple[str, str, str]], money: str = "DECIMAL(38,18)") -> None:
    """A FOCUS Parquet file: (cost, team, charge category) per line, in November 2026."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("CREATE TABLE lines (i INTEGER, cost VARCHAR, team VARCHAR, category VARCHAR)")
    con.executemany("INSERT INTO lines VALUES (?, ?, ?, ?)", [(i, *c) for i, c in enumerate(costs)])
    con.execute(
        f"COPY (SELECT CAST(cost AS {money}) AS BilledCost, CAST(cost AS {money}) AS EffectiveCost, "
        f"CAST(cost AS {money}) AS ListCost, 'USD' AS BillingCurrency, "
        "TIMESTAMP '2026-11-01' AS BillingPeriodStart, TIMESTAMP '2026-12-01' AS BillingPeriodEnd, "
        "TIMESTAMP '2026-11-02' + INTERVAL 1 HOUR * i AS ChargePeriodStart, "
        "TIMESTAMP '2026-11-02' + INTERVAL 1 HOUR * (i + 1) AS ChargePeriodEnd, category AS ChargeCategory, "
        "'Compute' AS ServiceName, 'r-' || i AS ResourceId, to_json(map {'team': team})::VARCHAR AS Tags "
        f"FROM lines) TO '{path}' (FORMAT parquet)")
    con.close()


def spendlake(config: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def test_45_costs_with_18_decimals_near_1e19_status_equals_attribute_and_check_passes(tmp_path):
    focus_parquet(tmp_path / "export" / "bill.parquet",
                  [(BIG[0], "nlp", "Usage"), (BIG[1], "vision", "Usage"), (BIG[2], "vision", "Usage"),
                   (BIG[3], "nlp", "Usage"), (TAX, "", "Tax")])
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"),
        "sources": [{"name": "big", "kind": "focus", "location": str(tmp_path / "export")}],
        "attribution": {"shared": [{"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"}]}}))
    assert spendlake(config, "ingest").exit_code == 0
    # The documented rule: more than 12 decimals are rounded half away from zero.
    expected = sum((Decimal(c).quantize(Decimal("1e-12"), rounding=ROUND_HALF_UP) for c in [*BIG, TAX]), Decimal(0))
    [status] = json.loads(spendlake(config, "status", "--format", "json").output)
    assert Decimal(status["billed_cost"]) == expected
    done = spendlake(config, "attribute", *WINDOW, "--by", "team", "--format", "json")
    assert done.exit_code == 0, done.output
    answer = json.loads(done.output)
    assert answer["totals"] == [{"currency": "USD", "cost": status["billed_cost"]}]  # to the last decimal
    assert sum(Decimal(r["cost"]) for r in answer["rows"]) == expected
    assert {r["team"] for r in answer["rows"]} == {"nlp", "vision"}
    check = spendlake(config, "attribute", "--check", "--format", "json")
    assert check.exit_code == 0, check.output
    rows = json.loads(check.output)
    assert {Decimal(r["difference"]) for r in rows} == {Decimal(0)}
    # what the 12 decimals rounded away, per cost: the delivery's own sum is source_total + rounding
    delivered = sum((Decimal(c) for c in [*BIG, TAX]), Decimal(0))
    for row in rows:
        assert Decimal(row["source_total"]) + Decimal(row["rounding"]) == delivered, row
    assert Decimal(rows[0]["rounding"]) == delivered - expected != 0
    table = spendlake(config, "attribute", "--check", "--format", "table")
    assert table.exit_code == 0 and f"big 2026-11 billed {delivered - expected:f} USD" in table.output


def test_45_the_rounding_total_of_text_and_float_money_and_none_for_twelve_decimals(tmp_path):
    """FOCUS Parquet with money as text and as floats carries the part rounded away too; a
    file whose values have at most 12 decimals rounds nothing."""
    export = tmp_path / "export"
    export.mkdir()
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT * FROM (VALUES ('0.0000000000004', 1.0000000000001999::DOUBLE, '2.5', 0), "
        "('-0.0000000000006', 3::DOUBLE, '1e-13', 1)) AS t(BilledCost, EffectiveCost, ListCost, i) "
        ") TO '__out__' (FORMAT parquet)".replace("__out__", str(export / "raw.parquet")))
    con.execute(
        "COPY (SELECT BilledCost, EffectiveCost, ListCost, 'EUR' AS BillingCurrency, "
        "TIMESTAMP '2026-11-01' AS BillingPeriodStart, TIMESTAMP '2026-11-02' + INTERVAL 1 HOUR * i "
        "AS ChargePeriodStart, TIMESTAMP '2026-11-02' + INTERVAL 1 HOUR * (i + 1) AS ChargePeriodEnd, "
        "'Usage' AS ChargeCategory FROM read_parquet(?)) TO '__out__' (FORMAT parquet)".replace(
            "__out__", str(export / "bill.parquet")), [str(export / "raw.parquet")])
    con.close()
    (export / "raw.parquet").unlink()
    focus_parquet(tmp_path / "plain" / "bill.parquet", [("1.123456789012", "nlp", "Usage")])
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "json", "kind": "focus", "location": str(export)},
        {"name": "plain", "kind": "focus", "location": str(tmp_path / "plain")}]}))
    assert spendlake(config, "ingest").exit_code == 0
    check = spendlake(config, "attribute", "--check", "--format", "json")
    assert check.exit_code == 0, check.output
    rounding = {(r["source"], r["cost"]): Decimal(r["rounding"]) for r in json.loads(check.output)}
    assert rounding == {("json", "billed"): Decimal("0.0000000000004") + Decimal("0.0000000000004"),
                        ("json", "effective"): Decimal(repr(1.0000000000001999)) - 1, ("json", "list"): Decimal("1e-13"),
                        ("plain", "billed"): 0, ("plain", "effective"): 0, ("plain", "list"): 0}


def test_45_a_sum_that_would_overflow_the_lake_fails_its_period_named(tmp_path):
    half = "60000000000000000000000000"  # 6e25: one fits DECIMAL(38,12), two do not
    focus_parquet(tmp_path / "huge" / "bill.parquet", [(half, "nlp", "Usage"), (half, "nlp", "Usage")],
                  money="DECIMAL(38,10)")
    focus_parquet(tmp_path / "fine" / "bill.parquet", [("1.5", "nlp", "Usage")])
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"),
        "sources": [{"name": "huge", "kind": "focus", "location": str(tmp_path / "huge")},
                    {"name": "fine", "kind": "focus", "location": str(tmp_path / "fine")}]}))
    done = spendlake(config, "ingest")
    assert done.exit_code == 3 and "Traceback" not in done.output
    failed = [line for line in done.output.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and failed[0].startswith("huge ")
    assert "billing period 2026-11" in failed[0] and "sum of BilledCost in USD does not fit" in failed[0]
    assert "fine 2026-11: committed 1 rows" in done.output
    rows = json.loads(spendlake(config, "status", "--format", "json").output)
    assert [(r["source"], r["billed_cost"]) for r in rows] == [("fine", "1.500000000000")]
    check = spendlake(config, "attribute", "--check")
    assert check.exit_code == 0, check.output


def test_45_focus_csv_money_with_18_decimals_gives_its_rounding_total(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "bill.csv").write_text(
        "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd\n"
        "12000000000000000000.123456789012345678,1.5,USD,2026-11-01,2026-11-02T00:00:00Z,2026-11-02T01:00:00Z\n"
        "-0.000000000000700000000000000001,2,USD,2026-11-01,2026-11-02T01:00:00Z,2026-11-02T02:00:00Z\n",
        encoding="utf-8")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                      "sources": [{"name": "csv", "kind": "focus", "location": str(export)}]}))
    assert spendlake(config, "ingest").exit_code == 0
    [status] = json.loads(spendlake(config, "status", "--format", "json").output)
    assert Decimal(status["billed_cost"]) == Decimal("12000000000000000000.123456789012") - Decimal("0.000000000001")
    rows = {r["cost"]: r for r in json.loads(spendlake(config, "attribute", "--check", "--format", "json").output)}
    # 0.000000000000345678 rounded away from the first; the second (18 decimals as read) gave 0.0000000000003
    assert Decimal(rows["billed"]["rounding"]) == Decimal("0.000000000000345678") + Decimal("0.0000000000003")
    assert Decimal(rows["effective"]["rounding"]) == 0


def test_45_text_money_of_1e20_or_more_is_kept_and_more_than_12_decimals_on_it_fails_named(tmp_path):
    """FOCUS CSV money is parsed from its text: up to the lake's 26 integer digits it is kept
    as written (the CSV reader's DECIMAL(38,18) stopped at 1e20); with more than 12 decimals on
    1e20 or more, what the lake rounds away cannot be summed exactly: the file fails, named,
    for CSV and for Parquet text alike (Parquet text used to lose that part silently)."""
    header = "BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd\n"
    line = ",USD,2026-11-01,2026-11-02T00:00:00Z,2026-11-02T01:00:00Z\n"
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "bill.csv").write_text(header + "12345678901234567890123456.5" + line)
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "bill.csv").write_text(header + "1.5" + line + "123456789012345678901.0000000000001" + line)
    focus_parquet(tmp_path / "text" / "bill.parquet", [("123456789012345678901.0000000000001", "nlp", "Usage")],
                  money="VARCHAR")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": name, "kind": "focus", "location": str(tmp_path / name)} for name in ("big", "csv", "text")]}))
    done = spendlake(config, "ingest")
    assert done.exit_code == 3 and "Traceback" not in done.output
    failed = sorted(line for line in done.output.splitlines() if "FAILED" in line)
    assert [line.split()[0] for line in failed] == ["csv", "text"]
    for line in failed:
        assert "column BilledCost: more than 12 decimals on a value of 1e20 or more" in line
        assert "123456789012345678901.0000000000001" in line
    [status] = json.loads(spendlake(config, "status", "--format", "json").output)
    assert Decimal(status["billed_cost"]) == Decimal("12345678901234567890123456.5")
