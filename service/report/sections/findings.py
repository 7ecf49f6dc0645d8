"""Report sections drawn from the findings table: waste by rule, open findings, anomalies.

Findings are the state of the last `spendlake rules run`, not of the report day: the store
keeps each finding's latest state, no history. Each section says so, naming the data's end the
run judged to; a past day's report (that end after the day) also leaves out the findings whose
episode or window began after the day (they cannot be the day's), and those with neither (read
from an inventory snapshot) first seen after it. Only open findings count
(acknowledged and resolved ones are left out).
Categories stay apart: "Waste by rule" holds the `waste` findings and their monthly waste
(the sum `spendlake_waste_monthly_usd` shows), split on the page into what goes on (a month) and
finished costs (once: failed attempts re-run, unused Capacity Blocks) when there are any; anomalies (overspend) show their excess spend
and unallocated spend (ownership) the unallocated spend of the window, as `impact_usd`.

Anomalies: the `spend-anomaly` rule's findings, with the root causes the report shows taken
from `evidence.root_causes`, a list of `{"dimension": "service", "value": "Amazon EC2",
"impact_usd": "1200.50"}` (largest first). Unallocated spend: the `unallocated-spend` rule's
findings are its top causes. Until those rules exist, the sections say so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from rules.base import registered, waste_per
from service.core.lake import Lake
from service.core.timewindow import day_start, iso_utc, minute_text
from service.core.units import usd
from service.findings.store import load_findings
from service.report.model import Chart, Column, Section, Table, unavailable

ANOMALY_RULE = "spend-anomaly"
UNALLOCATED_RULE = "unallocated-spend"


def finding_columns(money: str, label: str) -> list[Column]:
    """A findings table's columns with its one money column (monthly waste or impact)."""
    return [
        Column("rule", "rule"), Column("severity", "severity"), Column("team", "team"), Column("project", "project"),
        Column("resource_id", "resource", css="long"), Column("summary", "finding", css="finding"),
        Column("since", "since", "time"), Column(money, label, "money"),
    ]


def page_columns(columns: list[Column], *named: str) -> list[Column]:
    """The columns with the resource (and `named`) left to the CSV and JSON: each finding's
    sentence names its resource, and the page keeps room for the sentence, the money and the id
    at 1280 px (800 px for anomalies)."""
    hidden = ("resource_id", *named)
    return [replace(c, in_html=False) if c.key in hidden else c for c in columns]


def _finding_row(finding) -> dict:
    """`since`: when what the finding describes began, as its text says (an anomaly's episode
    start, the start of the window a share was measured over), else its earliest sight
    (`_first_sighted`): the date the past-day filter (`_began`) judges it by."""
    window = finding.evidence.get("window_start")  # a share measured over a window (unallocated-spend)
    sighted = _first_sighted(finding)
    since = (finding.evidence.get("start") or (iso_utc(datetime.fromisoformat(window).replace(tzinfo=timezone.utc))
                                                if window else None)
             or (iso_utc(sighted) if sighted else None))
    return {"rule": finding.rule, "severity": finding.severity, "team": finding.team, "project": finding.project,
            "resource_id": finding.resource_id, "summary": finding.summary, "currency": "USD",
            "since": since, "monthly_waste_usd": finding.monthly_waste_usd, "impact_usd": finding.impact_usd,
            "id": finding.id}


def _began(finding) -> datetime | None:
    """When what the finding describes began, where it says: an anomaly's episode (a date), the
    window the rule measured over (a share, idle hours, unused commitment, re-run attempts); else,
    for a finding read from an inventory snapshot (checkpoints, datasets, log groups), when it was
    first seen: the earlier of the rules run that first saw it and the snapshot it names."""
    said = _moment(finding.evidence.get("start") or finding.evidence.get("window_start"))
    return said if said is not None else _first_sighted(finding)


def _first_sighted(finding) -> datetime | None:
    """The earlier of the rules run that first saw the finding and the snapshot its evidence names."""
    seen = [moment for moment in (_moment(finding.evidence.get("snapshot_date")), finding.first_seen) if moment]
    return min((m.replace(tzinfo=timezone.utc) if m.tzinfo is None else m for m in seen), default=None)


def _moment(text) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00")) if isinstance(text, str) else None
    except ValueError:
        return None
    return moment.replace(tzinfo=timezone.utc) if moment and moment.tzinfo is None else moment


def of_day(findings: list, day: date, none: str) -> tuple[list, str, str | None]:
    """The open findings a report of `day` lists, the sentence saying what they are as of (`none`
    when there are none) and that sentence again when they are not as of the day (for summary.md,
    which lists them without the section's note): those of the last rules run (its data's end:
    the latest `last_seen`), less, when that run judged past the day, those that began after it (a
    window or an episode starting after the day is none of the day's; `_began`)."""
    end = day_start(day) + timedelta(days=1)
    judged = max((f.last_seen for f in findings if f.last_seen), default=None)
    if judged is None:
        return findings, none, None
    note = f"As of the last rules run (data to {minute_text(judged)} UTC)"
    if judged <= end:
        return findings, note + ".", None
    kept = [f for f in findings if not ((began := _began(f)) and began >= end)]
    left = (f"; {len(findings) - len(kept)} that began or were first seen after {day.isoformat()} are left out"
            if len(kept) < len(findings) else "")
    past = (f"{note}, not as of {day.isoformat()}: findings keep their latest state only (one resolved since "
            f"is not listed, figures are the latest){left}.")
    return kept, past, past


def _total(rows: list[dict], label_key: str, *money_keys: str, **extra) -> dict:
    """The total row of a findings table: how many, and the sum of each money column."""
    total = {label_key: f"total ({len(rows)})", "currency": "USD", **extra}
    for key in money_keys:
        total[key] = sum((r[key] for r in rows), Decimal(0))
    return total


def waste_section(lake: Lake, day: date, top: int) -> Section:
    findings, as_of, past = of_day(load_findings(lake, status="open", category="waste"), day,
                                   "No open findings in the last rules run (`spendlake rules run` refreshes them).")
    per = {f.id: waste_per(f) for f in findings}
    once = {key for key, said in per.items() if said == "once"}
    what = "waste" if once else "monthly waste"
    by_rule: dict[str, list] = defaultdict(list)
    for finding in findings:
        by_rule[finding.rule].append(finding)
    # a finished cost (a failed attempt re-run, an unused Capacity Block) is no month's waste: with
    # one, the page splits the waste it would otherwise call monthly (JSON and CSV keep the sum too)
    summary = Table("waste_by_rule", f"Open findings and {what} by rule", [
        Column("rule", "rule"), Column("findings", "open findings", "count"),
        Column("critical", "critical", "count"),
        Column("monthly_waste_usd", what, "money", in_html=not once),
        *([Column("month_usd", "a month, while it goes on", "money"), Column("once_usd", "finished, once", "money")]
          if once else []),
    ])
    for rule, items in by_rule.items():
        summary.rows.append({"rule": rule, "findings": len(items), "currency": "USD",
                             "critical": sum(f.severity == "critical" for f in items),
                             "monthly_waste_usd": sum((f.monthly_waste_usd for f in items), Decimal(0)),
                             "month_usd": sum((f.monthly_waste_usd for f in items if f.id not in once), Decimal(0)),
                             "once_usd": sum((f.monthly_waste_usd for f in items if f.id in once), Decimal(0))})
    summary.rows.sort(key=lambda r: (-r["monthly_waste_usd"], r["rule"]))
    summary.total = _total(summary.rows, "rule", "monthly_waste_usd", "month_usd", "once_usd", findings=len(findings),
                           critical=sum(f.severity == "critical" for f in findings))
    shown = [{**_finding_row(f), "per": per[f.id]} for f in findings[:top]]  # load_findings sorts by $
    top_findings = Table.top(
        "open_findings", top, f"open findings by {what}",
        page_columns(finding_columns("monthly_waste_usd", "waste $" if once else "monthly $"))
        + [Column("per", "per")] * bool(once) + [Column("id", "id", css="long")],
        rows=shown, markdown=(("rule", "resource_id", "team", *(["per"] if once else [])), "monthly_waste_usd"),
        summary_note=past)
    top_findings.total, top_findings.notes = _month_and_once_total(shown)
    if not findings:
        return Section("waste", "Waste by rule", note=as_of)
    chart = Chart("bars", "Waste of open findings by rule (USD): a month of what goes on, finished costs once"
                  if once else "Monthly waste of open findings by rule (USD)", [r["rule"] for r in summary.rows],
                  {"waste": [r["monthly_waste_usd"] for r in summary.rows]}, "USD")
    note = f"{as_of} Owners come from attribution." + (
        " A month is what a finding costs a month while it goes on; a finished cost (failed attempts of a run "
        "launched again, an unused Capacity Block) is what it cost, once, not a month." if once else "")
    return Section("waste", "Waste by rule", tables=[summary, top_findings], charts=[chart], note=note)


def _month_and_once_total(rows: list[dict]) -> tuple[dict, list[str]]:
    """The top findings' total: a month's waste and a finished cost do not add up (a rate and a
    sum paid once), so with both listed the total is of the monthly ones and a note names the
    finished ones' sum, as the table by rule shows them apart."""
    pers = sorted({row["per"] for row in rows})
    if len(pers) < 2:
        return _total(rows, "rule", "monthly_waste_usd", per=pers[0] if pers else ""), []
    monthly = [row for row in rows if row["per"] != "once"]
    finished = sum((row["monthly_waste_usd"] for row in rows if row["per"] == "once"), Decimal(0))
    total = _total(monthly, "rule", "monthly_waste_usd", per="a month")
    total["rule"] = f"total, a month ({len(monthly)})"
    return total, [f"The total is of the {len(monthly)} findings that cost a month while they go on; the "
                   f"{len(rows) - len(monthly)} finished ones cost {usd(finished)} once, which is no month's "
                   "waste and is not added to it."]


def anomalies_section(lake: Lake, day: date, top: int) -> Section:
    if ANOMALY_RULE not in registered():
        return unavailable("anomalies", "Anomalies", "the spend-anomaly rule is not part of this build")
    anomalies, as_of, past = of_day(load_findings(lake, rule=ANOMALY_RULE, status="open"), day,
                                    "No open spend anomalies in the last rules run.")
    if not anomalies:
        return Section("anomalies", "Anomalies", note=as_of)
    # the series (team|service) and its project are in the finding's sentence: the page keeps
    # room for the sentence and its causes even 800 px wide (CSV and JSON keep both)
    columns = page_columns(finding_columns("impact_usd", "excess $"), "project")
    table = Table("anomalies", "Open spend anomalies", columns + [Column("root_causes", "top causes", css="causes")],
                  markdown=(("team", "summary"), "impact_usd"), summary_note=past)
    for finding in anomalies[:top]:
        row = _finding_row(finding)
        row["root_causes"] = _root_causes(finding.evidence)
        table.rows.append(row)
    table.total = _total(table.rows, "rule", "impact_usd")
    return Section("anomalies", "Anomalies", tables=[table],
                   note=f"{as_of} Overspend, not waste: the excess over expected spend of each episode.")


def _root_causes(evidence: dict, shown: int = 3) -> str | None:
    """The rule's top contributors as `service Amazon EC2: $1,200.50; …`."""
    causes = evidence.get("root_causes")
    parts = []
    for cause in causes[:shown] if isinstance(causes, list) else []:
        if isinstance(cause, dict):
            name = " ".join(str(cause[k]) for k in ("dimension", "value") if cause.get(k) is not None)
            impact = cause.get("impact_usd")
            parts.append(f"{name}: ${Decimal(str(impact)).quantize(Decimal('0.01')):,}" if impact is not None else name)
    return "; ".join(parts) or None


def unallocated_causes(lake: Lake, day: date, top: int) -> Table | str:
    """The unallocated-spend rule's findings (top services, accounts, resources), or why there are none."""
    if UNALLOCATED_RULE not in registered():
        return "Top causes come from the unallocated-spend rule, which is not part of this build yet."
    findings, as_of, past = of_day(load_findings(lake, rule=UNALLOCATED_RULE, status="open"), day,
                                "No open unallocated-spend findings in the last rules run.")
    if not findings:
        return as_of
    rows = [_finding_row(f) for f in findings[:top]]
    # no total row: each finding measures the same spend by another dimension (a dollar on no team
    # and no project is in both), so their sum would count it again
    # in summary.md as the page lists them, each the spend with no value of its dimension (`resource_id`)
    return Table("unallocated_causes", "Top causes of unallocated spend", finding_columns(
        "impact_usd", "unallocated $"), rows=rows, markdown=(("resource_id", "summary"), "impact_usd"),
        summary_note=past, notes=[as_of, *[
            "No total: each row is the window's spend with no value of one dimension, and a dollar with none of "
            "several (no team and no project) is in each of their rows."] * (len(rows) > 1)])
