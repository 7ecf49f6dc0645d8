"""`spendlake demo`: the synthetic ML organisation's bill, ingested into a local lake.

Layout under the demo directory (default `./spendlake-data`, so the lake is where
`spendlake` looks without a config):

    <dir>/demo/export/ml-org-cur2/   the CUR 2.0 delivery (data/ and metadata/)
    <dir>/demo/inventory/            tags, S3 listing and lifecycles, log groups, GPU utilisation
                                     and the Slurm cluster's daily `sacct --json` files
                                     (connectors.synthetic.inventory), as local files
    <dir>/demo/spendlake.yaml        the config the demo used: one `aws-cur2` source and
                                     five inventory sources reading those files
    <dir>/lake/                      the lake
    <dir>/reports/<last day>/        the daily report of the window's last day (service.report.write)

The bill carries an injected anomaly (extra GPU nodes for the `eval` team over the last
three days, connectors.synthetic.org.inject_gpu_anomaly) besides its untagged spend, and a
Slurm cluster (`p5-west`, 16 p5.48xlarge nodes tagged only with the cluster and the node
name, shared by pretraining, post-training, evaluation and debugging jobs:
connectors.synthetic.slurm) whose jobs the `ml-org-slurm` source reads; the
config gets two budgets sized from the ingested spend — one the team has already crossed
(forecast to cross where the bill begins within the month: demo_budgets), one it is forecast
to cross —, a plan is registered for the cluster's llama-405b pretraining run
(`PLAN`), and the demo runs the rules before the report, so the report shows budgets, the
anomaly, unallocated spend and the plan against its actual; the report is recorded as the
service's daily run of the next day (service.serve.scheduler.record_daily_run).

Deterministic for a given seed and window; re-running the same day rewrites identical
files, so the ingest finds every delivery already held and changes nothing. A re-run with
another seed or window starts the export, the inventory and the lake afresh (`<dir>/demo/window.json`
says which the last run made): the other window's job and inventory snapshots kept beside the new
ones would double-book the cluster's jobs and change every answer.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import yaml

from connectors.synthetic.billing import GenerationResult, default_start, write_billing
from connectors.synthetic.capacity import add_capacity_reservation
from connectors.synthetic.inventory import write_inventory
from connectors.synthetic.org import INSTANCES, build_organisation, inject_gpu_anomaly
from connectors.synthetic.slurm import CLUSTER_TAG, NODE_TAG, add_slurm_cluster
from rules.base import Finding
from service.core.config import Config, load_config, parse_config
from service.core.config_file import DEMO_CONFIG
from service.core.config_paths import dangling_link
from service.core.coverage import data_end
from service.core.errors import LakeBusyError, UsageError
from service.core.lake import Lake
from service.findings.budgets import budget_statuses, early_in_month
from service.findings.forecast import history_start, month_bounds
from service.findings.plan_values import as_billed
from service.findings.run import run_rules
from service.ingest.billing import IngestResult, ingest
from service.ingest.inventory import InventoryOutcome, run_inventory
from service.planning.estimate import estimate, plan_inputs
from service.planning.plans import Plan, load_plans, plan_from_estimate, register_plan
from service.report.write import ReportResult, write_report
from service.serve.scheduler import record_daily_run

DEFAULT_DIR = DEMO_CONFIG.parents[1]  # spendlake-data
SOURCE_NAME = "ml-org"
CONFIG_HEADER = "# written by `spendlake demo`"
# How the organisation's inconsistent tag keys map to dimensions, and who shares tax and
# support (see README "Attribution"); the Slurm cluster's nodes carry only the cluster and the
# node name, so its cost goes to the jobs that held their GPUs (README "Shared GPU clusters"):
# a job's team is its Slurm account, its project the wckey, the rest from its comment's labels.
ATTRIBUTION = {
    "clusters": {"node_tag": NODE_TAG, "cluster_tag": CLUSTER_TAG},
    "dimensions": {
        "team": {"tags": ["team", "owner-team", "account"]},
        "project": {"tags": ["project", "wckey"]},
        "experiment": {"tags": ["experiment"]},
        # a job's comment labels say its type once it ended; while it runs (Slurm stores the
        # comment when a job ends: the demo writes it from the start, RUNNING_COMMENTS, for its
        # run) and for debug sessions (no labels) its partition and name do
        "job_type": {"rules": [{"match": {"partition": "debug"}, "value": "debug"},
                               {"match": {"partition": "eval"}, "value": "eval"},
                               {"match": {"job_name": "^sft-"}, "value": "sft"},
                               {"match": {"job_name": "^dpo-"}, "value": "rl"},
                               {"match": {"partition": "train"}, "value": "pretrain"}]},
    },
    "shared": [
        {"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"},
        {"match": {"service": "AWS Support (Business)"}, "split": "even", "by": "team"},
    ],
}


# The demo's sacct files show a running job's comment (its run, experiment and job type labels), so
# a run still running is found by its name (`runs --run sft-chat-v5-28`), its cost under its run, not
# under its job id. No Slurm version's sacct does: Slurm stores the comment only when the job ends
# (connectors.synthetic.sacct), so a site's running run is found by its job id until then.
RUNNING_COMMENTS = True

# `spendlake estimate --gpu H100` (or A100) prices a run at what the demo's bill charges a GPU-hour:
# its p5.48xlarge (p4d.24xlarge) on-demand rate over the instance's 8 GPUs (12.29; 4.096575)
ESTIMATE = {"gpus": {gpu: {"price_per_gpu_hour": str(Decimal(INSTANCES[instance][0]) / INSTANCES[instance][2])}
                     for gpu, instance in (("H100", "p5.48xlarge"), ("A100", "p4d.24xlarge"))}}
# The plan the research lead registered for the cluster's llama-405b pretraining run, as
# `spendlake estimate --params 405B --tokens 100B --gpu H100 --gpus 88 --mfu 0.35-0.45 --failure-overhead 0.1
# --register llama-405b-r1 --project llama-405b --experiment llama-405b --start <the window's first day>` would
# (the run's experiment: its actual is the run's cost; the project's alone holds its debug jobs too): the first
# pretraining block's 11 p5 nodes (the twelfth is its spare), at the bill's p5 price; its first job
# starts in the window's first hours and it outlasts the window (connectors.synthetic.slurm), and
# 79 to 102 days at that MFU bracket it, so `spendlake plans` and the report set it against its actual.
PLAN = {"name": "llama-405b-r1", "project": "llama-405b", "experiment": "llama-405b",
        "inputs": {"params": "405B", "tokens": "100B", "gpu": "H100", "gpus": 88, "mfu": "0.35-0.45",
                   "failure_overhead": "0.1"}}


@dataclass
class DemoResult:
    config_path: Path
    config: Config
    generation: GenerationResult
    ingest: IngestResult
    inventory: list[InventoryOutcome]
    findings: list[Finding]
    as_of: datetime  # the demo's "now": the end of the bill's data (`data_through`), the end of its last day
    report: ReportResult  # the daily report of the window's last day
    afresh: str | None = None  # why the demo's files and lake were started again, if they were


def run_demo(directory: str | Path = DEFAULT_DIR, *, days: int = 60, seed: int = 7,
             start: date | None = None) -> DemoResult:
    """Generate the organisation's export, write the demo config, ingest it."""
    link = dangling_link(Path(directory).absolute())
    if link is not None:  # it would be made at the link's target, a place nobody chose
        raise UsageError(f"{link} is a symbolic link to {os.readlink(link)}, which does not exist", where="--dir",
                         hint="mount or create what it points to, or give --dir another folder")
    root = Path(directory).resolve()
    demo_dir = root / "demo"
    org = build_organisation(seed, start or default_start(days), days)
    afresh = _start_afresh_for_another_window(root, {"seed": seed, "start": org.start.isoformat(), "days": days})
    inject_gpu_anomaly(org)
    add_slurm_cluster(org)
    add_capacity_reservation(org)
    generation = write_billing(org, demo_dir / "export", formats=("parquet",))
    inventory = write_inventory(generation.organisation, demo_dir / "inventory", running_comments=RUNNING_COMMENTS)
    config_path = demo_dir / DEMO_CONFIG.name
    document = {
        "lake": str(root / "lake"),
        "sources": [{"name": SOURCE_NAME, "kind": "aws-cur2", "location": str(generation.exports["parquet"])}],
        "inventory": inventory.sources(SOURCE_NAME),
        "attribution": ATTRIBUTION,
        "estimate": ESTIMATE,
        # inventory tags place most untagged team spend; experiments stay largely unallocated
        "rules": {"unallocated-spend": {"dimensions": ["team", "project", "experiment"]}},
    }
    config = _write_config(config_path, document)
    ingested = ingest(config)
    last_day = org.start + timedelta(days=org.days - 1)
    # the organisation's "now": where its bill ends (the data's end, as every window sees it)
    as_of = data_end(Lake.of(config)) or datetime.combine(last_day + timedelta(days=1), time(), timezone.utc)
    snapshots = run_inventory(config, now=as_of)  # the inventory as it stood at the bill's end
    _register_plan(config, org.start)  # before the rules: a planned run's spend is expected, not an anomaly
    budgets = demo_budgets(config, as_of.replace(tzinfo=None), org.start)
    if budgets:
        config = _write_config(config_path, {**document, "budgets": budgets})
    findings = run_rules(config, now=as_of).result.findings
    report = write_report(config, last_day)
    # the report a service's daily run the next day writes, after the verify this fresh lake needs not:
    # `spendlake serve` started then does not write it again
    record_daily_run(Lake.of(config), last_day + timedelta(days=1))
    return DemoResult(config_path=config_path, config=config, generation=generation, ingest=ingested,
                      inventory=snapshots, findings=findings, as_of=as_of, report=report, afresh=afresh)


def _register_plan(config: Config, start: date) -> Plan:
    """Register the demo's plan (`PLAN`) from `start`, its project spelt as the bill spells it; the same
    plan again on a re-run (the plans file is written only when it changes)."""
    lake = Lake.of(config)
    plan, _ = as_billed(lake, config, plan_from_estimate(estimate(plan_inputs(PLAN["inputs"]), config),
                                                        name=PLAN["name"], project=PLAN["project"],
                                                        experiment=PLAN["experiment"], start=start.isoformat()))
    if plan not in load_plans(lake):  # a re-run's lake stays byte for byte as it was
        register_plan(lake, plan)
    return plan


def _start_afresh_for_another_window(root: Path, window: dict) -> str | None:
    """Remove the export, inventory and lake a demo of another seed or window wrote under `root`
    (only a directory holding the demo's own config), and note this window. A demo from before
    the note is told by its Slurm files' days."""
    demo_dir, note = root / "demo", root / "demo" / "window.json"
    config = demo_dir / DEMO_CONFIG.name
    if not config.is_file() or not config.read_text(encoding="utf-8").startswith(CONFIG_HEADER):
        previous = None  # nothing of a demo's here: nothing to remove
    elif (noted := _noted(note)) is not None:
        previous = noted
    else:
        days = sorted({p.stem.removeprefix("sacct-") for p in (demo_dir / "inventory").glob("slurm/*/sacct-*.json")})
        first = date.fromisoformat(window["start"])
        same = days == [(first + timedelta(days=i)).isoformat() for i in range(window["days"])]
        previous = None if same else {"start": days[0] if days else None, "days": len(days)}
    said = None
    if previous is not None and previous != window:
        with _every_lock(Lake(root / "lake")) as lake:  # a serve or an ingest on it refuses us, not loses its files
            for path in (*(p for p in _children(lake.root) if p != lake.locks), demo_dir / "export",
                         demo_dir / "inventory"):
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
        said = (f"{root} held a demo of another window ({_window_text(previous)}); its export, inventory and lake "
                f"are started afresh for {_window_text(window)}")
    demo_dir.mkdir(parents=True, exist_ok=True)
    if _noted(note) != window:
        note.write_text(json.dumps(window) + "\n", encoding="utf-8")
    return said


@contextmanager
def _every_lock(lake: Lake) -> Iterator[Lake]:
    """`lake` with each of its locks held (the service's, the writers', and any other it has made):
    another process holding one refuses this demo (LakeBusyError, exit 3) naming itself. The locks
    themselves stay: a process starting meanwhile must find them held."""
    names = {"service", "ingest", *(p.stem for p in _children(lake.locks) if p.suffix == ".lock")}
    with ExitStack() as held:
        for name in sorted(names):
            try:
                held.enter_context(lake.lock(name))
            except LakeBusyError as exc:
                raise LakeBusyError(f"the demo of another window cannot start {lake.root} afresh: {exc.message}",
                                    where=exc.where, hint="stop that process (or wait for it to finish) and run "
                                    "the demo again, or give --dir another folder") from None
        yield lake


def _children(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []


def _noted(note: Path) -> dict | None:
    """The window the last run noted; None without a readable note (then its Slurm files tell it)."""
    try:
        noted = json.loads(note.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return noted if isinstance(noted, dict) and {"seed", "start", "days"} <= noted.keys() else None


def _window_text(window: dict) -> str:
    if window["start"] is None:
        return "without Slurm files to tell it by"
    seed = f"seed {window['seed']}, " if "seed" in window else ""
    return f"{seed}{window['days']} days from {window['start']}"


def _write_config(path: Path, document: dict) -> Config:
    text = CONFIG_HEADER + "; edit a copy, it is rewritten on every run\n" + yaml.safe_dump(
        document, sort_keys=False)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return load_config(path)


def demo_budgets(config: Config, now: datetime, begins: date) -> list[dict]:
    """Two team budgets sized from the bill (which `begins` on that day), so the demo shows one
    crossed and one forecast to cross on any day of any month the bill holds whole: `pretrain` at
    80% of what it spent this month, or in the month's first days (while `spendlake budgets` and
    the report show how the last month ended) 80% of last month's spend, which the month just
    closed crossed. A month the bill begins within holds a few days of its spend: a budget they
    cross is a sliver of a month's (3 days from December 3rd: forecast at 1,200%), so there
    `pretrain` is 80% of its month-end forecast, forecast to reach 125%. `eval` halfway between
    its actual and its month-end forecast, or (data ending on the 1st at 00:00 closes the month:
    nothing left to forecast) at 1.1 × its actual, past 80%. None for a team without spend."""
    lake = Lake.of(config)
    this_month, _ = month_bounds(now)
    last_month = month_bounds(this_month - timedelta(days=1))[0]
    budgets = []
    for name, team in (("pretrain-monthly", "pretrain"), ("eval-monthly", "eval")):
        probe = {"name": name, "dimension": "team", "value": team, "amount": "1"}
        [status] = budget_statuses(lake, config.model_copy(update={"budgets": parse_config(
            {"budgets": [probe]}).budgets}), history_start(now), now, now)
        actual, forecast = status.outlook.actual, status.outlook.forecast
        if team == "pretrain":
            closed = status.last_month.actual if status.last_month else Decimal(0)
            if early_in_month(now) or actual <= 0:  # the month just closed is the one shown
                whole, spent = begins <= last_month.date() and closed > 0, closed
            else:
                whole, spent = begins <= this_month.date(), actual
            amount = (spent if whole else forecast) * Decimal("0.8")
        elif forecast > actual:
            amount = (actual + forecast) / 2
        else:
            amount = actual * Decimal("1.1")
        amount = amount.quantize(Decimal("1"))
        if amount > 0 and (team == "pretrain" or actual < amount < forecast or forecast == actual < amount):
            budgets.append({**probe, "amount": str(amount)})
    return budgets
