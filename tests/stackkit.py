"""The monitoring stack for the deploy and end-to-end tests: a demo organisation's exports,
`spendlake serve` over them, and real Prometheus / Alertmanager started from the shipped
files under deploy/, with test-only timings. Everything binds 127.0.0.1 and is stopped by
the context managers; every wait is bounded."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml
from aws_exports import LEGACY_COLUMNS, legacy_csv, line
from conftest import require_binary, stop
from servicekit import REPO, start_serve, write_config

DEPLOY = REPO / "deploy"
GPU_HOURLY_USD = "32.77"  # p4d.24xlarge on demand
TAG_COLUMNS = ["resourceTags/user:project", "resourceTags/user:experiment", "resourceTags/user:cluster",
               "resourceTags/user:slurm-node"]
CLUSTER_HOURLY_USD = "98.32"  # p5.48xlarge on demand: a node of the shared cluster `gpu-west`
# The cluster's node and its jobs meet through the node tag (README "Shared GPU clusters").
CLUSTERS = {"clusters": {"node_tag": "slurm-node", "cluster_tag": "cluster"}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f" ({last_error})" if last_error else ""))


def http_json(url: str, data: bytes | None = None) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as response:
        return json.load(response)


def write_demo_exports(folder: Path, now: datetime) -> dict:
    """A legacy CUR export and GPU utilisation for the last eight hours: team nlp's
    p4d instance sat idle all along; team vision spent on storage, and its daily archive
    bill jumped tenfold yesterday (a spend anomaly); one line has no tags; team inference's
    Savings Plan covered $4 of its $5 hourly commitment; a p5 node of the
    shared cluster `gpu-west` (tagged with the cluster and its node name only) ran one
    job on 4 of its 8 GPUs (run `pretrain-7b`, a jobs file), so half its cost is idle.
    Returns the config's `sources` and `inventory` sections for them."""
    folder.mkdir(parents=True, exist_ok=True)
    top = now.replace(minute=0, second=0, microsecond=0)
    rows, utilisation = [], ["resource_id,gpu,hour,util_pct,metric"]
    for back in range(8, 0, -1):
        start = top - timedelta(hours=back)
        period = start.strftime("%Y-%m")
        hour = {"lineItem/UsageStartDate": iso(start), "lineItem/UsageEndDate": iso(start + timedelta(hours=1))}
        rows.append({**line(period, GPU_HOURLY_USD, team="nlp", **{"lineItem__ResourceId": "i-0e2e1",
                                                                    "product__instanceType": "p4d.24xlarge"}),
                     **hour, "identity/LineItemId": f"gpu-{back}", "resourceTags/user:project": "llm",
                     "resourceTags/user:experiment": "run-42"})
        rows.append({**line(period, "2.5", team="vision", **{"lineItem__ProductCode": "AmazonS3",
                                                              "product__ProductName": "Amazon Simple Storage Service",
                                                              "product__instanceType": "",
                                                              "lineItem__ResourceId": "vision-datasets"}),
                     **hour, "identity/LineItemId": f"s3-{back}", "resourceTags/user:project": "vit"})
        utilisation.append(f"i-0e2e1,,{start.strftime('%Y-%m-%d %H:%M:%S')},1.0,DCGM_FI_PROF_SM_ACTIVE")
        rows.append({**line(period, CLUSTER_HOURLY_USD, **{"lineItem__ResourceId": "i-0c1u5",
                                                           "product__instanceType": "p5.48xlarge"}),
                     **hour, "identity/LineItemId": f"node-{back}", "resourceTags/user:cluster": "gpu-west",
                     "resourceTags/user:slurm-node": "gpu-001"})
    for back in range(35, 0, -1):  # vision's daily storage spend: steady, then ten times as much yesterday
        day = (top - timedelta(days=back)).replace(hour=0)
        rows.append({**line(day.strftime("%Y-%m"), "1000" if back == 1 else "100", team="vision",
                            **{"lineItem__ProductCode": "AmazonS3", "product__ProductName": "Amazon Simple Storage Service",
                               "product__instanceType": "", "lineItem__ResourceId": "vision-archive"}),
                     "lineItem/UsageStartDate": iso(day), "lineItem/UsageEndDate": iso(day + timedelta(days=1)),
                     "identity/LineItemId": f"s3-daily-{back}", "resourceTags/user:project": "vit"})
    rows.append({**line(top.strftime("%Y-%m"), "3", **{"lineItem__ProductCode": "AWSDataTransfer",
                                                        "product__instanceType": "", "lineItem__ResourceId": ""}),
                 "lineItem/UsageStartDate": iso(top - timedelta(hours=2)),
                 "lineItem/UsageEndDate": iso(top - timedelta(hours=1)), "identity/LineItemId": "untagged"})
    plan = "arn:aws:savingsplans::012345678901:savingsplan/sp-demo"  # team inference's, 80% used
    for back in range(8, 0, -1):
        start = top - timedelta(hours=back)
        period, hour = start.strftime("%Y-%m"), {"lineItem/UsageStartDate": iso(start),
                                                 "lineItem/UsageEndDate": iso(start + timedelta(hours=1))}
        for kind, cost, extra in (
                ("SavingsPlanCoveredUsage", "6", {"lineItem__ResourceId": "i-0sp", "product__instanceType": "m7i.large",
                                                  "savingsPlan__SavingsPlanEffectiveCost": "4"}),
                ("SavingsPlanNegation", "-6", {"lineItem__ResourceId": "i-0sp", "product__instanceType": "m7i.large"}),
                ("SavingsPlanRecurringFee", "5", {"lineItem__ResourceId": plan, "savingsPlan__TotalCommitmentToDate": "5",
                                                  "savingsPlan__UsedCommitment": "4"})):
            rows.append({**line(period, cost, kind=kind, team="inference", **extra), **hour,
                         "savingsPlan/SavingsPlanARN": plan, "identity/LineItemId": f"sp-{kind}-{back}"})
    (folder / "cur.csv").write_bytes(legacy_csv(rows, LEGACY_COLUMNS + TAG_COLUMNS + ["savingsPlan/SavingsPlanARN"]))
    (folder / "gpu.csv").write_text("\n".join(utilisation) + "\n")
    (folder / "jobs.csv").write_text("job_id,start_time,end_time,gpus,nodes,cluster,state,run_id,team,job_type\n"
                                     f"7001,{iso(top - timedelta(hours=8))},,4,gpu-001,gpu-west,RUNNING,"
                                     "pretrain-7b,nlp,pretrain\n")
    return {"sources": [{"name": "cur", "kind": "aws-cur", "location": str(folder / "cur.csv")}],
            "inventory": [{"name": "gpu", "kind": "gpu-metrics", "path": str(folder / "gpu.csv")},
                          {"name": "jobs", "kind": "jobs-file", "path": str(folder / "jobs.csv")}]}


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def demo_service(tmp_path: Path) -> Iterator[str]:
    """`spendlake serve` over the demo exports, with a budget team nlp has exceeded and one whose
    team no cost line carries (spendlake_budget_unmatched); yields
    its base URL once the rules job has stored the idle-GPU finding (the first ingest and
    rules run at start)."""
    # top_n 2: the findings' teams past the two with the most at stake fold, so the folded rest's
    # `folded` label, which the alerts and dashboard read, is exposed (the idle nlp ranks)
    data = {"lake": str(tmp_path / "lake"), "service": {"listen": "127.0.0.1:0", "top_n": 2}, "attribution": CLUSTERS,
            "budgets": [{"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "100"},
                        {"name": "nlp-typo", "dimension": "team", "value": "nlpp", "amount": "100"}],
            **write_demo_exports(tmp_path / "exports", datetime.now(timezone.utc))}
    proc, base = start_serve(write_config(tmp_path, data))
    try:
        # a scrape right after the first ingest, rules and report computes every family (the
        # cluster allocation's too): seconds on a loaded machine, so a poll waits for it
        wait_until(lambda: b'rule="idle-gpu"' in urllib.request.urlopen(base + "/metrics", timeout=60).read(),
                   timeout=120, what="the idle-gpu finding in spendlake's metrics")
        yield base
    finally:
        stop(proc)
        assert proc.returncode == 0, "".join(proc.output)


def shortened_rules(target: Path) -> Path:
    """The shipped alert rules with every `for:` cut to 1s, so a test sees them fire."""
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
    target.write_text(yaml.safe_dump(rules))
    return target


@contextmanager
def prometheus(tmp_path: Path, spendlake: str, alertmanager: str | None = None) -> Iterator[str]:
    """Prometheus from deploy/prometheus/prometheus.yml, pointed at `spendlake` (and
    `alertmanager`), scraping and evaluating every second."""
    binary = require_binary("prometheus")
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(shortened_rules(tmp_path / "alerts.yml"))]
    [job] = config["scrape_configs"]
    job.update(scrape_timeout="1s", static_configs=[{"targets": [urllib.parse.urlsplit(spendlake).netloc]}])
    config["alerting"]["alertmanagers"][0]["static_configs"] = [
        {"targets": [urllib.parse.urlsplit(alertmanager).netloc] if alertmanager else []}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    base = f"http://127.0.0.1:{free_port()}"
    with running([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                  f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address={base[7:]}"],
                 tmp_path / "prometheus.log"):
        wait_until(lambda: urllib.request.urlopen(base + "/-/ready", timeout=2).status == 200, 20, "Prometheus ready")
        yield base


def query(prometheus_url: str, expr: str) -> dict:
    """An instant query; returns the JSON `data` or raises with Prometheus's error."""
    url = f"{prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        body = http_json(url)
    except urllib.error.HTTPError as error:
        raise AssertionError(f"{expr}: {error.read().decode()}") from None
    assert body["status"] == "success", body
    return body["data"]


@contextmanager
def alertmanager(tmp_path: Path, receiver: str) -> Iterator[str]:
    """Alertmanager from deploy/alertmanager/alertmanager.yml with every webhook pointed at
    `receiver` (path = receiver name) and the grouping waits cut to a second."""
    binary = require_binary("prometheus-alertmanager")
    config = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    config["route"].update(group_wait="1s", group_interval="1s")
    for item in config["receivers"]:
        for hook in item.get("webhook_configs", []):
            hook["url"] = f"{receiver}/{item['name']}"
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))
    base = f"http://127.0.0.1:{free_port()}"
    with running([binary, f"--config.file={tmp_path / 'alertmanager.yml'}", f"--storage.path={tmp_path / 'am'}",
                  f"--web.listen-address={base[7:]}", "--cluster.listen-address="], tmp_path / "alertmanager.log"):
        wait_until(lambda: urllib.request.urlopen(base + "/-/ready", timeout=2).status == 200, 20,
                   "Alertmanager ready")
        yield base


@contextmanager
def running(command: list[str], log: Path) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
    try:
        yield proc
    except BaseException:
        print(log.read_text(errors="replace")[-4000:])  # shown by pytest on failure
        raise
    finally:
        stop(proc)
