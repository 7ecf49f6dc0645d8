"""commitment-unused and capacity-unused project a window's unused part to a 730-hour month over
the hours the commitment or reservation existed in the window, not the whole window: one bought
or expired inside it has rows for part of it only."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

from rules.context import RuleContext
from rules.capacity_unused import CapacityUnused
from rules.commitment_unused import CommitmentUnused
from rules.engine import evaluate
from service.core.lake import Lake
from service.core.timewindow import Window
from tests.rules_lake import build_lake

SINCE = datetime(2026, 11, 1)
WINDOW = Window(SINCE.replace(tzinfo=timezone.utc), datetime(2026, 11, 8, tzinfo=timezone.utc))  # 168 hours


def period(start: datetime, length: timedelta) -> dict:
    return {"ChargePeriodStart": str(start), "ChargePeriodEnd": str(start + length)}


def plan_rows(cid: str, starts: list[datetime], length: timedelta, used: str, unused: str, **extra) -> list[dict]:
    common = {"CommitmentDiscountId": cid, "CommitmentDiscountType": "Savings Plan", "BillingCurrency": "USD",
              "ResourceId": cid, **extra}
    return [row for start in starts for row in (
        {**common, "ChargeCategory": "Usage", "CommitmentDiscountStatus": "Used", "EffectiveCost": used,
         **period(start, length)},
        {**common, "ChargeCategory": "Purchase", "CommitmentDiscountStatus": "Unused", "EffectiveCost": unused,
         **period(start, length)})]


def findings(tmp_path, rows: list[dict], rule) -> dict:
    lake = Lake(tmp_path / "lake")
    build_lake(lake, {"costs": rows}, WINDOW.until.date())
    fresh, outcomes = evaluate([rule], RuleContext(con=lake.query(), window=WINDOW))
    assert [o.status for o in outcomes] == ["ok"]
    return {f.resource_id: f for f in fresh[rule.name]}


def test_a_commitment_bought_or_expired_inside_the_window_projects_over_the_hours_it_existed(tmp_path):
    hour = timedelta(hours=1)
    ri = plan_rows("ri-expired", [SINCE, SINCE + timedelta(days=1)], timedelta(days=1), "0", "12",
                        x_commitment_end=str(SINCE + timedelta(days=1, hours=12)))
    ri[-1]["EffectiveCost"] = "6"  # its Unused on day 2: the 12 hours before it expired
    rows = [
        # bought at the start of day 5: 72 hourly rows, $0.40 of each hour unused
        *plan_rows("sp-bought", [SINCE + timedelta(days=4) + h * hour for h in range(72)], hour, "0.6", "0.4"),
        # expired at noon on day 2 (the bill says so), billed by day: $0.50 an hour unused for 36 hours
        *ri,
        # there all window: $0.25 an hour unused
        *plan_rows("sp-whole", [SINCE + h * hour for h in range(168)], hour, "0.75", "0.25"),
    ]
    found = findings(tmp_path, rows, CommitmentUnused())
    bought, expired, whole = found["sp-bought"], found["ri-expired"], found["sp-whole"]
    assert Decimal(bought.evidence["unused_usd"]) == Decimal("28.80") and bought.evidence["hours"] == "72"
    assert bought.impact_usd == Decimal("0.4") * 730  # not 28.80 x 730 / 168 = 125.14
    assert "over the 72 hours it had rows in" in bought.summary
    assert Decimal(expired.evidence["unused_usd"]) == 18 and expired.evidence["hours"] == "36"
    assert expired.impact_usd == Decimal("0.5") * 730  # its daily rows run to midnight; its expiry cuts them
    assert whole.impact_usd == Decimal("0.25") * 730 and whole.evidence["hours"] == "168"
    assert "hours it had rows in" not in whole.summary


def test_a_commitment_bought_mid_day_in_a_daily_export_projects_from_its_start_time(tmp_path):
    """A daily export's first row of a Savings Plan bought at 14:00 on day 5 runs from midnight:
    its 10 hours' unused part (0.40 an hour, as the bill writes it) was projected over 72 hours
    (235.22 a month); its x_commitment_start (savingsPlan/StartTime) cuts the span to 58."""
    day = timedelta(days=1)
    rows = plan_rows("sp-afternoon", [SINCE + 4 * day, SINCE + 5 * day, SINCE + 6 * day], day, "14.4", "9.6",
                     x_commitment_start=str(SINCE + 4 * day + timedelta(hours=14)))
    rows[0]["EffectiveCost"], rows[1]["EffectiveCost"] = "6", "4"  # day 5: its 10 hours only
    finding = findings(tmp_path, rows, CommitmentUnused())["sp-afternoon"]
    assert Decimal(finding.evidence["unused_usd"]) == Decimal("23.2") and finding.evidence["hours"] == "58"
    assert finding.impact_usd == Decimal("0.4") * 730
    assert "over the 58 hours it had rows in" in finding.summary


def test_an_on_demand_capacity_reservation_released_inside_the_window_projects_over_its_hours(tmp_path):
    rows = [{"CapacityReservationId": "cr-1", "CapacityReservationStatus": status, "ChargeCategory": "Usage",
             "BilledCost": cost, "PricingQuantity": "1", "BillingCurrency": "USD", "x_capacity_reservation_type": "ODCR",
             "ResourceId": "cr-1" if status == "Unused" else "i-1",
             **period(SINCE + timedelta(hours=h), timedelta(hours=1))}
            for h in range(24) for status, cost in (("Used", "98"), ("Unused", "98"))]
    [finding] = findings(tmp_path, rows, CapacityUnused()).values()
    assert Decimal(finding.evidence["unused_usd"]) == 24 * 98
    assert finding.impact_usd == 98 * 730  # released after a day: not 24 x 98 x 730 / 168


def block_rows(cid: str, hours: int, purchase: str) -> list[dict]:
    """A Capacity Block of one instance bought the day before the window, its first day used, the rest
    empty; its hour rows carry no cost (paid up front)."""
    common = {"CapacityReservationId": cid, "x_capacity_reservation_type": "EC2 Capacity Blocks for ML",
              "BillingCurrency": "USD", "ResourceId": cid}
    return [{**common, "ChargeCategory": "Purchase", "BilledCost": purchase,
             **period(SINCE - timedelta(days=1), timedelta(hours=1))},
            *({**common, "ChargeCategory": "Usage", "CapacityReservationStatus": "Used" if h < 24 else "Unused",
               "BilledCost": "0", "PricingQuantity": "1", **period(SINCE + timedelta(hours=h), timedelta(hours=1))}
              for h in range(hours))]


def test_a_capacity_block_whose_hours_reach_the_data_end_says_it_is_priced_over_the_hours_so_far(tmp_path):
    # the data runs to the end of day 3: cb-running's hours reach it, cb-ended's stopped after day 2
    rows = [*block_rows("cb-running", 72, "3360"), *block_rows("cb-ended", 48, "960"),
            {"ResourceId": "i-1", "ChargeCategory": "Usage", "BilledCost": "1", "BillingCurrency": "USD",
             **period(SINCE + timedelta(hours=71), timedelta(hours=1))}]
    found = findings(tmp_path, rows, CapacityUnused())
    running, ended = found["cb-running"], found["cb-ended"]
    # 48 of the 72 hours reported so far unused, each at 3360 / 72: the most they can cost
    assert running.impact_usd == 2240 and running.evidence["reported_hours"] == "72"
    assert running.evidence["runs_past_data"] is True
    assert "reach the data's end (2026-11-04 00:00 UTC) and may run on" in running.summary
    assert "over the 72 hour(s) reported so far: at most what its unused hours cost" in running.summary
    assert ended.impact_usd == 480 and ended.evidence["runs_past_data"] is False  # 24 of its 48 hours
    assert "may run on" not in ended.summary
