"""Commitments: what each Savings Plan, reservation and committed use discount cost over a
window, how much of it went to use and how much was left unused, how much of its eligible
usage it covered, and when it expires. Read from the FOCUS columns every connector fills,
whatever the provider (connectors/ say how each maps its own columns):

- a commitment is a `CommitmentDiscountId`; its `CommitmentDiscountStatus` is `Used` on the
  usage it covered and `Unused` on the charge for the part nobody used (AWS: the
  SavingsPlanRecurringFee / RIFee line's unused part; Azure: the `UnusedReservation` /
  `UnusedSavingsPlan` rows; FOCUS exports: rows with status `Unused`);
- used = Σ EffectiveCost of its `Used` rows, unused = Σ EffectiveCost of its `Unused` rows
  (FOCUS amortises a commitment's purchase over the usage it covers and the unused rest, so a
  Purchase row's EffectiveCost is 0 and used + unused is the commitment's cost in the window);
  commitment = used + unused; utilization = used ÷ commitment;
- coverage = the on-demand equivalent (ListCost, else BilledCost) of the usage it covered ÷
  that of all eligible usage in the window: usage of the services it covered (for a
  usage-based commitment, a reservation or committed use discount, only in the regions it
  covered), covered or not, in its currency;
- expiry = `x_commitment_end` (AWS `savingsPlan/EndTime`, `reservation/EndTime`); other
  providers' cost rows do not carry it (NULL);
- owner: each dimension's value of the commitment's own charge (its ResourceId, on the
  Unused or Purchase rows, else the commitment id), through the same attribution as
  `spendlake attribute` (the commitment's tags, then account rules), else `unallocated`;
  `account` is the sub-account that pays it.

Rows cut by the window count by the fraction of their charge period inside it, as in
attribution (exact decimals, rounded half-even to 12 places). Currencies are never summed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal

from service.attribution.resources import attribute_resources
from service.core.config import Config
from service.attribution.query import cli_option, listed_once
from service.core.coverage import anchored_window, snapshot_data_end
from service.core.errors import UsageError
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.output import cut
from service.core.snapshot import Snapshot, read_consistently
from service.core.timewindow import Window, data_anchored, iso_utc, share_in_window
from service.core.units import naive_utc

HUNDRED = Decimal(100)
COMMITMENTS_SINCE = "30d"  # the window's start when `commitments --since` or the API's `since` is not given

LINES_SQL = """
SELECT CommitmentDiscountId, CommitmentDiscountStatus, BillingCurrency, ServiceName, RegionId,
       ChargePeriodStart, ChargePeriodEnd, sum(EffectiveCost), sum(coalesce(ListCost, BilledCost))
FROM costs
WHERE CommitmentDiscountId IS NOT NULL AND CommitmentDiscountStatus IN ('Used', 'Unused')
  AND ChargePeriodStart < ? AND coalesce(ChargePeriodEnd, ChargePeriodStart + INTERVAL 1 MICROSECOND) > ?
GROUP BY ALL
"""
ABOUT_SQL = """
SELECT CommitmentDiscountId, any_value(CommitmentDiscountName), any_value(CommitmentDiscountType),
       any_value(CommitmentDiscountCategory), max({end}),
       coalesce(any_value(ResourceId) FILTER (WHERE own), CommitmentDiscountId),
       coalesce(any_value(SubAccountId) FILTER (WHERE own), any_value(SubAccountId))
FROM (SELECT *, CommitmentDiscountStatus = 'Unused' OR ChargeCategory = 'Purchase' AS own FROM costs)
WHERE CommitmentDiscountId IN (SELECT unnest(?))
GROUP BY CommitmentDiscountId
"""
ELIGIBLE_SQL = """
SELECT BillingCurrency, ServiceName, RegionId, ChargePeriodStart, ChargePeriodEnd, sum(coalesce(ListCost, BilledCost))
FROM costs
WHERE ChargeCategory = 'Usage' AND coalesce(CommitmentDiscountStatus, '') <> 'Unused'
  AND ServiceName IN (SELECT unnest(?))
  AND ChargePeriodStart < ? AND coalesce(ChargePeriodEnd, ChargePeriodStart + INTERVAL 1 MICROSECOND) > ?
GROUP BY ALL
"""


def percent(part: Decimal, whole: Decimal) -> Decimal | None:
    return None if whole == 0 else (part * HUNDRED / whole).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)


@dataclass
class Commitment:
    """One commitment over the window (money in its currency, exact)."""

    commitment_id: str
    currency: str | None
    name: str | None = None
    type: str | None = None
    category: str | None = None
    expires: datetime | None = None
    account: str | None = None
    owner: dict[str, str] = field(default_factory=dict)
    used: Decimal = Decimal(0)
    unused: Decimal = Decimal(0)
    covered_usage: Decimal = Decimal(0)
    eligible_usage: Decimal = Decimal(0)
    eligible: set[tuple[str, str | None]] = field(default_factory=set)  # (service, region or None: any)

    @property
    def commitment(self) -> Decimal:
        return self.used + self.unused

    @property
    def utilization_pct(self) -> Decimal | None:
        return percent(self.used, self.commitment)

    @property
    def unused_pct(self) -> Decimal | None:
        return percent(self.unused, self.commitment)

    @property
    def coverage_pct(self) -> Decimal | None:
        return percent(self.covered_usage, self.eligible_usage)

    def to_json(self, by: tuple[str, ...]) -> dict:
        return {"commitment_id": self.commitment_id, "name": self.name, "type": self.type,
                "category": self.category, **{d: self.owner.get(d) for d in by}, "account": self.account,
                "currency": self.currency, "commitment": self.commitment, "used": self.used, "unused": self.unused,
                "unused_pct": self.unused_pct, "utilization_pct": self.utilization_pct,
                "covered_usage": self.covered_usage, "eligible_usage": self.eligible_usage,
                "coverage_pct": self.coverage_pct, "expires": iso_utc(self.expires) if self.expires else None}


@dataclass(frozen=True)
class CommitmentsResult:
    window: Window
    by: tuple[str, ...]
    rows: tuple[Commitment, ...]
    totals: tuple[dict, ...]  # per currency: commitment, used, unused, unused_pct, utilization_pct, coverage_pct

    def to_json(self) -> dict:
        """The `spendlake commitments --format json` contract (money and percentages as decimals)."""
        return {"since": iso_utc(self.window.since), "until": iso_utc(self.window.until), "by": list(self.by),
                "rows": [row.to_json(self.by) for row in self.rows], "totals": list(self.totals)}


def commitments_asked(lake: Lake, config: Config, since: str | None = None, until: str | None = None, by: str = "",
                      *, now: datetime | None = None, naming: Callable[[str], str] = cli_option) -> CommitmentsResult:
    """`spendlake commitments` and `/api/v1/commitments`: the commitments of the window typed
    (`since`: by default COMMITMENTS_SINCE; `until`: by default the data's end) with their owners
    in the dimensions of `by` (comma-separated); a bad value names its option as `naming` spells it."""
    since = since or COMMITMENTS_SINCE
    dims = listed_once(by.split(","), naming("by"))
    return commitments(lake, config, anchored_window(lake, since, until, now=now, naming=naming), by=dims,
                       anchored=data_anchored(since, until, now=now, naming=naming), naming=naming)


def commitments(lake: Lake, config: Config, window: Window, by: tuple[str, ...] = (),
                snapshot: Snapshot | None = None, anchored: Callable[..., Window] | None = None,
                naming: Callable[[str], str] = cli_option) -> CommitmentsResult:
    """Every commitment with Used or Unused rows in the window, largest unused first; from
    `snapshot` when given (a writer holding the lake lock), else one consistent state.
    `anchored` (service.core.timewindow.data_anchored): the window as a function of the data's
    end, re-anchored to the state read (an ingest committing before the read moves the end)."""
    unknown = [d for d in by if d not in config.attribution.dimensions]
    if unknown:
        raise UsageError(f"unknown dimension(s) {', '.join(map(cut, unknown))}", where=naming("by"),
                         hint=f"valid dimensions: {', '.join(config.attribution.dimensions)}")
    def read(snap: Snapshot) -> tuple[Window, list[Commitment], dict]:
        at = window if anchored is None else anchored(end=snapshot_data_end(lake, snap))
        return (at, *_read(lake, at, snap))
    window, rows, eligible = read(snapshot) if snapshot is not None else read_consistently(lake, read)
    owners = attribute_resources(lake, config, sorted({row.owner["resource"] for row in rows})) if rows else {}
    defaults = {d: config.attribution.dimensions[d].default for d in config.attribution.dimensions}
    for row in rows:
        row.owner = {**defaults, **owners.get(row.owner["resource"], {})}
    rows.sort(key=lambda r: (-r.unused, r.commitment_id, r.currency or ""))
    return CommitmentsResult(window, tuple(by), tuple(rows), _totals(rows, eligible))


def _read(lake: Lake, window: Window, snapshot: Snapshot) -> tuple[list[Commitment], dict]:
    if not snapshot.checks:
        return [], {}
    since, until = naive_utc(window.since), naive_utc(window.until)
    found: dict[tuple[str, str | None], Commitment] = {}
    with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=("costs",)) as con:  # the window's commitment lines
        end_column = "x_commitment_end" if "x_commitment_end" in _columns(con) else "NULL::TIMESTAMP"
        for cid, status, currency, service, region, start, end, effective, listed in \
                con.execute(LINES_SQL, [until, since]).fetchall():
            row = found.setdefault((cid, currency), Commitment(cid, currency))
            amount = share_in_window(effective, start, end, since, until)
            if status == "Used":
                row.used += amount
                row.covered_usage += share_in_window(listed, start, end, since, until)
                if service:
                    row.eligible.add((service, region))
            else:
                row.unused += amount
        ids = sorted({cid for cid, _ in found})
        about = {r[0]: r[1:] for r in con.execute(ABOUT_SQL.format(end=end_column), [ids]).fetchall()} if ids else {}
        services = sorted({service for row in found.values() for service, _ in row.eligible})
        eligible: dict[tuple[str | None, str, str | None], Decimal] = defaultdict(Decimal)
        if services:
            for currency, service, region, start, end, listed in \
                    con.execute(ELIGIBLE_SQL, [services, until, since]).fetchall():
                eligible[(currency, service, region)] += share_in_window(listed, start, end, since, until)
    for row in found.values():
        name, kind, category, expires, resource, account = about.get(row.commitment_id, (None,) * 6)
        row.name, row.type, row.category, row.expires, row.account = name, kind, category, expires, account
        row.owner = {"resource": resource or row.commitment_id}
        if category != "Usage":  # a spend-based commitment applies to its services in any region
            row.eligible = {(service, None) for service, _ in row.eligible}
        row.eligible_usage = sum((amount for key, amount in eligible.items() if _eligible(row, key)), Decimal(0))
    return list(found.values()), eligible


def _eligible(row: Commitment, key: tuple[str | None, str, str | None]) -> bool:
    currency, service, region = key
    return currency == row.currency and ((service, None) in row.eligible or (service, region) in row.eligible)


def _columns(con) -> set[str]:
    return {name for (name,) in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'costs'").fetchall()}


def _totals(rows: list[Commitment], eligible: dict) -> tuple[dict, ...]:
    totals = []
    for currency in sorted({row.currency for row in rows}, key=lambda c: c or ""):
        mine = [row for row in rows if row.currency == currency]
        used = sum((row.used for row in mine), Decimal(0))
        unused = sum((row.unused for row in mine), Decimal(0))
        covered = sum((row.covered_usage for row in mine), Decimal(0))
        whole = sum((amount for key, amount in eligible.items() if any(_eligible(row, key) for row in mine)),
                    Decimal(0))
        totals.append({"currency": currency, "commitment": used + unused, "used": used, "unused": unused,
                       "unused_pct": percent(unused, used + unused), "utilization_pct": percent(used, used + unused),
                       "covered_usage": covered, "eligible_usage": whole, "coverage_pct": percent(covered, whole)})
    return tuple(totals)
