"""What `spendlake runs` answers: a row per run, the totals per group and currency, and what
the rows were read from (service/attribution/run_rows.py makes them; to_json is the API's shape)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from service.attribution.clusters import ClusterCost
from service.attribution.job_rules import IdleRule
from service.attribution.run_inputs import VALUES
from service.attribution.run_query import RunsQuery
from service.attribution.run_story import RunStory
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, iso_utc, past_the_data

OTHER = "other"
NO_CLUSTERS = ("no runs: the config has no `clusters:` under `attribution:` (attribution.clusters), which places the "
               "shared GPU clusters' instance cost on the jobs that held them: add it to see runs (README: Shared GPU "
               "clusters)")
GPU_HOURS_QUANTUM = MONEY_QUANTUM = Decimal("1e-6")


@dataclass(frozen=True)
class RunRow:
    run: str
    values: dict[str, str | None]  # team, project, experiment, job_type, cluster, user
    jobs: int
    restarts: int
    gpus: Decimal | None
    gpu_hours: Decimal | None
    cost: Decimal
    currency: str | None
    state: str | None
    start: datetime | None
    end: datetime | None
    idle_share: Decimal | None
    priced_hours: Decimal | None  # of gpu_hours, those of its jobs that cost: a job in no bill has no price
    folded_runs: int = 0  # `top`'s row of the rest (named `other`): the runs in it; a run may be named other too
    held_hours: Decimal | None = None  # gpu_hours before rounding: the rest and the totals sum these
    # what eval jobs naming this run (their parent_run) cost in its currency: beside `cost`, not in it
    # (those jobs are their own runs' rows; run_evals.py)
    eval_cost: Decimal = Decimal(0)

    @property
    def exact_hours(self) -> Decimal:
        return self.held_hours if self.held_hours is not None else self.gpu_hours or Decimal(0)

    @property
    def exact_cost_per_gpu_hour(self) -> Decimal | None:
        """The exact cost ÷ the exact priced GPU-hours: each figure shown rounds it once (JSON and CSV
        to 6 decimals, tables to the cent), never its 6 decimals again (2.0149999 / 1 is $2.01, not 2.02)."""
        if not self.priced_hours or self.currency is None:  # no currency: nothing billed, no price
            return None
        return self.cost / self.priced_hours

    @property
    def cost_per_gpu_hour(self) -> Decimal | None:
        exact = self.exact_cost_per_gpu_hour
        return None if exact is None else exact.quantize(MONEY_QUANTUM)

    def group(self, by: tuple[str, ...]) -> tuple[str | None, ...]:
        return tuple(self.state if d == "state" else self.values.get(d) for d in by)

    def to_json(self) -> dict:
        return {"run": self.run, **{d: self.values.get(d) for d in VALUES}, "jobs": self.jobs, "restarts": self.restarts,
                "gpus": _text(self.gpus), "gpu_hours": _text(self.gpu_hours), "cost": _text(self.cost),
                "currency": self.currency, "cost_per_gpu_hour": _text(self.cost_per_gpu_hour),
                "idle_share": _text(self.idle_share), "state": self.state,
                "start": iso_utc(self.start) if self.start else None, "end": iso_utc(self.end) if self.end else None,
                "eval_cost": _text(self.eval_cost),
                **({"folded_runs": self.folded_runs} if self.folded_runs else {})}


@dataclass(frozen=True)
class RunTotal:
    group: tuple[str | None, ...]
    currency: str | None
    runs: int
    jobs: int
    gpu_hours: Decimal
    cost: Decimal


@dataclass(frozen=True)
class RunsResult:
    query: RunsQuery
    rows: tuple[RunRow, ...]
    totals: tuple[RunTotal, ...]
    lake_empty: bool = False  # no bill in the lake: the rows are what the job records show, without cost
    overbooked: int = 0
    sources: tuple[tuple[str, datetime | None], ...] = ()  # each billing source read and its data_through
    clusters: tuple[ClusterCost, ...] = ()  # each cluster's instance cost and idle part in the window
    states_left_out: tuple[str, ...] = ()  # the last jobs' states `--state` did not name (why it kept none)
    story: RunStory | None = None  # `run`: its jobs, splits and idle
    idle_rules: tuple[IdleRule, ...] = ()  # the job-field rules no job of the window meets (job_rules.py)
    no_clusters: bool = False  # the config has no `clusters:`: no run, NO_CLUSTERS says why (`notes` in JSON)
    # what of the eval runs' cost no row's eval_cost holds (run_evals.unshown): stderr and the JSON's `notes`
    # a parent_run that no run of the window is; what the allocation assumes of the window's instances
    warnings: tuple[str, ...] = ()  # (instance_checks.py: GPU types the table lacks, instance ids no bill holds)
    # an eval in a currency its run has no row in; an eval run naming itself; why runs read $0 (run_cost_notes.py)
    notes: tuple[str, ...] = ()
    # billed: how the clusters' instances' effective cost in the window differs from their billed,
    # 'is $130.00 where they are billed $80.00 (...)', '' where it does not (the report's note)
    amortized: str = ""
    # the lake state the rows were read in: the job records its warnings read (AttributionResult.read_in)
    read_in: Snapshot | None = field(default=None, compare=False, repr=False)

    @property
    def window(self) -> Window:
        return self.query.window

    @property
    def data_through(self) -> datetime | None:
        """The end of the bill in the lake: a run's hours after it have no cost yet."""
        return max((moment for _, moment in self.sources if moment is not None), default=None)

    @property
    def unreached(self) -> str | None:
        """How much of the window lies past the bill's end (service.core.timewindow.past_the_data)."""
        return past_the_data(self.window, self.data_through)

    def to_json(self) -> dict:
        by = self.query.by
        return {"since": iso_utc(self.query.window.since), "until": iso_utc(self.query.window.until),
                "cost": self.query.cost, "by": list(by), "rows": [row.to_json() for row in self.rows],
                "totals": [{**dict(zip(by, t.group)), "currency": t.currency, "runs": t.runs, "jobs": t.jobs,
                            "gpu_hours": _text(t.gpu_hours), "cost": _text(t.cost)} for t in self.totals],
                "data_through": iso_utc(self.data_through) if self.data_through else None,
                "sources": [{"source": name, "data_through": iso_utc(moment) if moment else None}
                            for name, moment in self.sources]} | (self.story.to_json() if self.story else {}) | (
            {"notes": notes} if (notes := [*(self.story.notes if self.story else ()), *self.warnings, *self.notes,
                                            *([NO_CLUSTERS] if self.no_clusters else [])]) else {})


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")
