"""Running the rules: build the context a rule sees (the lake, the window, owners, budget
outlooks, direct daily spend, plans), evaluate, attach owners and store the result
(service/findings/store.py).

The outcome of the last run of each rule (ok / skipped / error with its message, finding
count, seconds) is kept in the lake's `_state/rules.json`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

from rules.base import SEVERITIES, Finding, Rule, configure, registered
from rules.context import LakeSql, PlannedWindow, RuleContext
from rules.engine import EngineResult, run
from service.attribution import HELD_TABLES, direct_daily_lookup, held_hours_lookup, run_costs_lookup
from service.core.config import Config
from service.core.errors import UsageError, os_error
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot, read_consistently
from service.core.snapshot_ledger import SET_ASIDE
from service.core.snapshot_set_aside import set_aside_table
from service.core.suggest import suggestion
from service.core.units import utc_now_iso
from service.core.coverage import anchored_window
from service.core.timewindow import Window, utc_now
from service.findings.budgets import budget_status
from service.findings.owners import fill_owners, owner_lookup, unowned
from service.findings.store import TABLE, load_findings, store_findings
from service.planning.plans import load_plans

log = logging.getLogger(__name__)


def rules_for(config: Config, only: Sequence[str] = ()) -> list[Rule]:
    """The configured rules (validated; errors carry `rules.<name>.<key>` paths)."""
    check_rule_names(only)
    rules = configure(config.rules, file=config.file)
    return [r for r in rules if not only or r.name in only]


def check_rule_names(names: Sequence[str], where: str = "--rule") -> None:
    """Every name is a registered rule, else a UsageError (exit 2, HTTP 400) with the closest names."""
    unknown = [name for name in dict.fromkeys(names) if name not in registered()]
    if unknown:
        raise UsageError(f"no rule named {', '.join(repr(n) for n in unknown)}", where=where,
                         hint=suggestion(unknown[0], registered(), "rules"))


def plan_windows(lake: Lake) -> tuple[PlannedWindow, ...]:
    """The registered plans as windows with their pessimistic total (naive UTC). A plan on a run (`--run`)
    expects that run's spend alone (the rule's daily spend carries the run a plan names: DailySpend.run),
    not its project's."""
    return tuple(PlannedWindow(p.name, p.project, p.experiment, p.start.replace(tzinfo=None),
                               p.end.replace(tzinfo=None), p.total_cost.high, p.run) for p in load_plans(lake))


def rule_context(lake: Lake, config: Config, window: Window, con: LakeSql, snapshot: Snapshot | None = None
                 ) -> RuleContext:
    """What the rules of one run see: `con` (a `Lake.query()` connection), owners through
    attribution, the budgets' outlooks at the window's end, direct daily spend, the plans and
    the runs' costs and the hours jobs held (read only when a rule asks); all in `snapshot`
    (the run's, taken with HELD_TABLES: its job records and tags), as `con` reads."""
    plans = plan_windows(lake)
    return RuleContext(con=con, window=window, owner_of=owner_lookup(lake, config, snapshot),
                       budget_outlooks=lambda: budget_status(lake, config, window.until, snapshot),
                       direct_daily=direct_daily_lookup(lake, config, plans, snapshot), plans=plans,
                       run_costs=run_costs_lookup(lake, config, snapshot),
                       held_hours=held_hours_lookup(lake, config, snapshot))


@dataclass(frozen=True)
class RunReport:
    result: EngineResult
    stored: bool


def run_rules(config: Config, *, only: Sequence[str] = (), since: str = "7d", dry_run: bool = False,
              now: datetime | None = None) -> RunReport:
    """Evaluate the rules over the window ending at the data's end (service.core.coverage:
    the same lake gives the same findings whatever the hour; `now` counts only for a lake
    without billing data); store unless `dry_run`."""
    rules = rules_for(config, only)
    lake = Lake.of(config)

    def evaluate(snapshot: Snapshot) -> EngineResult:
        # the window ends where the data it reads ends
        window = anchored_window(lake, since, now=now or utc_now(), snapshot=snapshot)
        # the rules' own SQL aggregates the window's lines (idle-gpu by instance and hour) in the
        # process the lookups' allocations share: beyond a reader's limit DuckDB spills
        with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT) as con:
            ctx = rule_context(lake, config, window, con, snapshot)
            mine, theirs = seen_here(lake, load_findings(lake))
            result = run(rules, ctx, mine, lambda found: fill_owners(found, ctx.owner_of, unowned(config)))
            held = {f.id for f in result.findings}
            return replace(result, findings=result.findings + [f for f in theirs if f.id not in held])

    # a dry run is a query: no lock file (the lock guards storing), so a read-only lake answers it
    with nullcontext() if dry_run else lake.lock(TABLE):
        for check in () if dry_run else set_aside_table(lake, TABLE):  # written again below
            log.warning("%s; moved under %s: this run writes the findings again, without the acknowledgements "
                        "it held", check.sentence(), lake.root / SET_ASIDE / check.key)
        # evaluated again when a commit (an ingest, a `forget`) changed the lake under it: a
        # rule must not judge half of one state, nor fail on a file the commit replaced
        result = read_consistently(lake, evaluate, HELD_TABLES)  # the job records and tags of its costs' state
        if not dry_run:
            store_findings(lake, result.findings)
            state = lake.read_state("rules")
            outcomes = state.get("rules", {})
            outcomes.update({o.rule: {**asdict(o), "finished_at": utc_now_iso()} for o in result.outcomes})
            stored = {f.id for f in result.findings}  # ids the store no longer holds are nobody's
            seen_by = {id_: by for id_, by in state.get("seen_by", {}).items() if id_ in stored}
            if lake.config_file is not None:
                seen_by |= {f.id: str(lake.config_file) for f in result.seen}
            try:
                lake.write_state("rules", {"rules": outcomes, "seen_by": seen_by})
            except OSError as exc:  # after the store: the findings stand, "nothing was changed" would be false
                raise os_error(exc, done="the findings are stored; only each rule's last outcome is not recorded") \
                    from None
    return RunReport(result=result, stored=not dry_run)


def seen_here(lake: Lake, previous: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(this config's stored findings, another's): on a lake two configs share, a finding last
    seen by the other config (its file still there) is its rules' to resolve, not this one's,
    which does not read that config's sources (it resolved them all, and they left `findings`).
    A config with no file (built in code) cannot be told from another: every finding is its own."""
    if lake.config_file is None:
        return list(previous), []
    seen_by = lake.read_state("rules").get("seen_by", {})

    def theirs(finding: Finding) -> bool:
        by = seen_by.get(finding.id)
        return by is not None and by != str(lake.config_file) and Path(by).is_file()

    return [f for f in previous if not theirs(f)], [f for f in previous if theirs(f)]


def fails(findings: Sequence[Finding], level: str | None) -> bool:
    """True when an open finding is at or above `level` (the exit-1 rule of `--fail-on`)."""
    if not level:
        return False
    floor = SEVERITIES.index(level)
    return any(f.status == "open" and SEVERITIES.index(f.severity) >= floor for f in findings)
