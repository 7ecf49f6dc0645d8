"""What an attribution's rows do not say by themselves, in words: known `where` values no line of
the window carries (together), periods `granularity` cuts, days of the window before the lake's
first bill, a `compare` window without cost, a cost some deliveries lack, a comma-separated `where`
value that matches nothing, job rules no job meets, over-booked hours, what the allocation assumes of
the window's instances (instance_checks.py, checked with the answer). Computed here once;
`spendlake attribute` prints them (stderr, the table's coverage line) and its JSON and
`/api/v1/attribute` carry them in `notes` (result.py). Of a list of runs: a window no bill
reaches, or one reaching past the bill's end (`spendlake runs` on stderr, `/api/v1/runs` in `notes`)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING

from service.attribution.api import attribute_query
from service.attribution.compute import period_span
from service.attribution.job_rules import idle_job_rules
from service.attribution.node_sharing import shared_nodes
from service.attribution.query import AttributionQuery, Naming, cli_option, typed
from service.attribution.result import AttributionResult
from service.core.config import Config, EngineConfig
from service.core.config_attribution import AttributionConfig
from service.core.coverage import billed_orphans, billing_periods, empty_lake_line, months_touched, periods_text
from service.core.lake import Lake
from service.core.timewindow import Window, minute_text, month_text

if TYPE_CHECKING:
    from service.attribution.run_result import RunsResult


def with_notes(lake: Lake, config: AttributionConfig | Config, query: AttributionQuery, result: AttributionResult,
               engine: EngineConfig | None = None, naming: Naming = cli_option) -> AttributionResult:
    """`result` with its notes (parameters named as `naming` spells them)."""
    notes = []
    cut = (cut_periods(result.window, query.granularity, {row.period for row in result.rows})
           if result.rows and query.granularity != "total" else "")
    if cut:
        notes.append(f"periods the window cuts: {cut}")
    if not result.rows and not result.unmatched and not result.lake_empty:  # an empty lake is the caller's to say
        notes.append(_no_rows(lake, config, query, result, engine, naming))
    elif result.previous and result.rows and not any(row.previous_cost for row in result.rows):
        notes.append(f"{outside_the_data(lake, result.previous, 'the previous window')}; {naming('compare')} "
                     "shows it as 0")
    notes += ending_inside(result)
    notes += result.run_notes
    lacking = lacking_cost(lake, query.cost, result.window)
    if lacking:
        other = "effective" if query.cost == "billed" else "billed"
        notes.append(f"{', '.join(lacking)} delivered no {query.cost} cost, only {other} cost: counted as 0 here; "
                     f"{typed(naming, 'cost', other)} counts it")
    attribution = config if isinstance(config, AttributionConfig) else config.attribution
    rules = result.idle_rules if result.idle_rules is not None else idle_job_rules(
        lake, attribution, result.window, query.by, snapshot=result.read_in)  # not checked with the answer (attribute_query's job_rules)
    warnings = [rule.text() for rule in rules if not rule.ever]
    warnings += result.instance_warnings
    if result.overbooked:
        warnings.append(f"{result.overbooked} instance-hour(s) in the window were over-booked: their jobs held more "
                        "GPU-seconds than the instances have, so those hours were shared in proportion (no idle, no "
                        "dollar made up); check the job records' GPUs and nodes")
        warnings += [shared.text() for shared in shared_nodes(lake, result.window, result.read_in)]
    unmatched = tuple((dim, value, hint + several(dim, value, naming)) for dim, value, hint in result.unmatched)
    # of rows only: what their totals leave out (a window with none says why above)
    first = (billing_periods(lake) or [None])[0] if result.rows else None
    return replace(result, notes=tuple(notes), unbilled=before_first_bill(result.window, first), unmatched=unmatched,
                   warnings=tuple(warnings), quiet=tuple(rule.text() for rule in rules if rule.ever))


def ending_inside(result: AttributionResult) -> list[str]:
    """Each source whose data ends inside the window, before the lake's data does: the window's
    hours after it hold none of that source's cost yet, though the coverage line's lake-wide
    `data through` runs past them (its `behind:` names every source behind, in the window or not)."""
    window, end = result.window, result.data_through
    return [f"source {name}'s data ends {minute_text(moment)} UTC, inside the window: the window's last "
            f"{(window.until - moment) / timedelta(hours=1):,.1f} h hold none of {name}'s cost yet (the lake's "
            f"data runs through {minute_text(end)} UTC)"
            for name, moment in result.sources if moment is not None and end is not None and moment < end
            and window.since < moment < window.until]


def lacking_cost(lake: Lake, cost: str, window: Window | None = None) -> list[str]:
    """`source period` of each delivery (in the window's months; None: all) with no line of this cost."""
    if cost == "list":  # the ledger keeps no list-cost totals
        return []
    first, last = ("", "~") if window is None else (  # every period sorts between "" and "~"
        month_text(window.since), month_text(window.until - timedelta(microseconds=1)))
    return sorted(f"{e.source} {e.billing_period}" for e in lake.ledger()
                  if lake.counts(e.source) and first <= e.billing_period <= last and e.lacks(cost))


def several(dim: str, value: str, naming: Naming = cli_option) -> str:
    """How to give several values, for one typed comma-separated (`by` takes a list; a tag value
    may hold a comma, so `where` does not split it)."""
    parts = [part.strip() for part in value.split(",") if part.strip()]
    if len(parts) < 2:
        return ""
    return (f"; several values: repeat {naming('where')}, e.g. "
            + " ".join(typed(naming, "where", f"{dim}={part}") for part in parts))


def cut_periods(window: Window, granularity: str, shown: Collection[date]) -> str:
    """The first and last day, week or month that the window holds only part of, with the part:
    their rows sum fewer days than their label's period has ('' when it holds them whole). Of
    the `shown` periods only: one without cost has no row to misread."""
    since, until = (moment.astimezone(timezone.utc).replace(tzinfo=None) for moment in (window.since, window.until))
    cut = []
    last = until - timedelta(microseconds=1)
    for start, end in dict.fromkeys(period_span(moment, granularity) for moment in (since, last)):
        held = min(end, until) - max(start, since)
        if held < end - start and start.date() in shown:
            days = [f"{round(span / timedelta(days=1), 2):g}" for span in (held, end - start)]
            cut.append(f"{granularity} {start.date()} holds {minute_text(max(start, since))} → "
                       f"{minute_text(min(end, until))} UTC ({days[0]} of {days[1]} day{'s' * (days[1] != '1')})")
    return "; ".join(cut)


def before_first_bill(window: Window, first_period: str | None) -> str | None:
    """How much of the window lies before `first_period` (YYYY-MM, the lake's first bill)."""
    begins = first_period and datetime.strptime(first_period, "%Y-%m").replace(tzinfo=timezone.utc)
    if not begins or window.since >= begins:
        return None
    days = (min(begins, window.until) - window.since) / timedelta(days=1)
    return f"the window's first {days:,.1f} days hold no bill (the lake's first billing period is {first_period})"


def _no_rows(lake: Lake, config: AttributionConfig | Config, query: AttributionQuery, result: AttributionResult,
             engine: EngineConfig | None, naming: Naming) -> str:
    """Why an answer has no rows: known `where` values that none of the window's lines carries
    (together), in a window that holds cost (as the answer's read saw it; asked again only of a
    read narrowed to the lines `where` can match); else the window holds none (see outside_the_data)."""
    window = result.window
    if query.where and (result.window_cost if result.window_cost is not None else attribute_query(
            lake, config, replace(query, where={}, top=None, compare=False, explain=False, granularity="total"),
            engine=engine).rows):
        option = naming("where")
        given = " ".join(typed(naming, "where", f"{dim}={value}") for dim, values in query.where.items()
                         for value in values)
        together = (": each value is on lines of the lake, none of the window's lines carries them all"
                    if len(query.where) > 1 else "")
        return f"no cost in the window {window.shown()} matches {given}{together} (without {option} the window holds cost)"
    return outside_the_data(lake, window)


def outside_the_data(lake: Lake, window: Window, what: str = "the window") -> str:
    """Why a window holds nothing: the billing periods the lake holds, so that a window before
    the first bill or in a month without one is not read as zero spend."""
    return f"no cost in {what} {window.shown()}; the lake holds the billing periods {periods_text(billing_periods(lake))}"


def runs_outside_the_data(lake: Lake, result: RunsResult) -> str | None:
    """The note of a list of runs with jobs in a window no bill reaches, before the first bill or
    after its end (`spendlake runs` says it on stderr whatever the format, `/api/v1/runs` in
    `notes`): their cost 0 is no bill, not no spend. None for one run's story (its own notes say
    it), for no run (the CLI says why of job records) and for a lake without a bill."""
    if result.story is not None or not result.rows or result.lake_empty or months_touched(
            result.window.since, result.window.until) & set(billing_periods(lake)):
        return None
    return outside_the_data(lake, result.window)


def runs_past_the_data(result: RunsResult) -> str | None:
    """The note of a list of runs whose window reaches past the bill's end (`spendlake runs` says
    it on stderr beside CSV and JSON, its table in the coverage line, `/api/v1/runs` in `notes`):
    a run's hours after the bill's end have no cost yet, not none. None for one run's story."""
    if result.story is not None or not result.rows or not result.unreached:
        return None
    return (f"{result.unreached} (data through {minute_text(result.data_through)} UTC): "
            "a run's hours after it have no cost yet")


def no_bill_note(lake: Lake, result: AttributionResult | RunsResult, shown: object = None) -> str | None:
    """Why an answer shows no cost where the lake holds no bill of the configured sources (it is
    empty, or holds only the bills of sources the config no longer names: a source renamed whose
    ingest under its new name failed), and the next step: `spendlake attribute` and `runs` say it
    on stderr, `/api/v1/attribute` and `/api/v1/runs` first in `notes`, so the API's $0 is not read
    as no spend. `shown`: the lake as the user named it. None where the lake holds one."""
    if not result.lake_empty:
        return None
    jobs = not isinstance(result, AttributionResult) and bool(result.rows)  # runs of job records, without cost
    if jobs and not billed_orphans(lake):
        return (f"the lake at {shown or lake.root} holds no bill: the runs of its job records show no cost until "
                "`spendlake ingest` stores one")
    return empty_lake_line(lake, shown, "the runs of its job records show no cost" if jobs else "")
