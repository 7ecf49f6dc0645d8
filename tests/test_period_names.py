"""The stager names each row's billing period from its BillingPeriodStart once per distinct start
(service.core.period_names), not by a strftime per line: the names, the files they go to and the
errors must be those strftime gave, across a year boundary, for batches of several periods and
for starts no period can be named from."""

from __future__ import annotations

from decimal import Decimal

import pytest

from service.core.errors import DataError
from service.core.hidden_columns import rounded_away_sql, rounding_select
from service.core.lake import Lake
from service.core.schema import cost_select_list
from service.core.staging import BATCH_ROWS


def spread_rows(con, starts: list[str], rows: int):
    """`rows` canonical rows whose BillingPeriodStart takes `starts` in turn (every batch holds all
    of them), each billing 1.25 USD (the row numbered 6, the first start's, 0.5 and 16 decimals: the
    part the lake's 12 rounds away is kept per period)."""
    listed = ", ".join(f"TIMESTAMP '{start}'" for start in starts)
    select = cost_select_list({
        "BillingPeriodStart": "p", "ChargePeriodStart": "p", "BillingCurrency": "'USD'",
        "BilledCost": "b", "EffectiveCost": "b",
    })
    rounding = rounding_select({"BilledCost": rounded_away_sql("b", "DECIMAL(38, 16)")})
    return con.sql(f"SELECT {select}{rounding} FROM (SELECT [{listed}][i % {len(starts)} + 1] AS p, "
                   f"CASE WHEN i = 6 THEN 0.5000000000000004::DECIMAL(38, 16) ELSE 1.25 END AS b "
                   f"FROM range({rows}) r(i))")


def periods_in_lake(lake: Lake) -> list[tuple]:
    return lake.query().execute("SELECT billing_period, strftime(min(BillingPeriodStart), '%Y-%m-%d %H:%M'), "
                                "count(*), sum(BilledCost) FROM costs GROUP BY ALL ORDER BY ALL").fetchall()


def test_periods_across_a_year_boundary_in_every_batch_go_to_their_own_files(tmp_path):
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    rows = 2 * BATCH_ROWS + 5  # three batches, each with all three starts: the names are reused
    lake.commit_costs(con, spread_rows(con, ["2026-12-01", "2027-01-01", "2026-12-31 23:30:00"], rows),
                      source="cur", delivery_id="d1", periods=None)
    december, january = (rows + 2) // 3 + (rows // 3), (rows + 1) // 3
    assert periods_in_lake(lake) == [
        ("2026-12", "2026-12-01 00:00", december, Decimal("1.25") * (december - 1) + Decimal("0.5")),
        ("2027-01", "2027-01-01 00:00", january, Decimal("1.25") * january)]
    entries = {entry.billing_period: entry for entry in lake.ledger()}
    assert sorted(entries) == ["2026-12", "2027-01"]
    assert (entries["2026-12"].rows, entries["2027-01"].rows) == (december, january)
    assert entries["2026-12"].totals[0].rounding == (("BilledCost", Decimal("4E-16")),)
    assert entries["2027-01"].totals[0].rounding == ()


def test_a_year_before_1000_is_named_in_four_digits(tmp_path):
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    lake.commit_costs(con, spread_rows(con, ["0999-12-01", "2026-11-01"], 10), source="cur", delivery_id="d1",
                      periods=None)
    assert [row[:3] for row in periods_in_lake(lake)] == [("0999-12", "0999-12-01 00:00", 5),
                                                          ("2026-11", "2026-11-01 00:00", 5)]


@pytest.mark.parametrize(("start", "named"), [
    ("10000-01-01", "'10000-01'"),
    ("0044-03-01 (BC)", "'-43-03'"),  # before the common era: the year DuckDB's year() gives is 44
    ("1044-03-01 (BC)", "'-1043-03'"),  # ... so an integer from year() would have read it as 1044-03
])
def test_a_start_no_period_can_be_named_from_fails_with_strftimes_text(tmp_path, start, named):
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    with pytest.raises(DataError, match=f"rows with an invalid or missing BillingPeriodStart \\({named}\\)"):
        lake.commit_costs(con, spread_rows(con, ["2026-11-01", start], 10), source="cur", delivery_id="d1",
                          periods=None)
    assert lake.ledger() == [] and not lake.has_table("costs")
