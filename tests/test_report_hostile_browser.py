"""The report's newer sections in a real headless Chromium with hostile text in every field a bill
or a job record fills: run ids, job types, clusters, users, experiments, failed-reruns' runs,
billing accounts, invoice ids and budget values. Nothing runs, no element is made from a value,
one long identifier does not push a table's amounts off the page, and the page's totals are
`spendlake attribute` and `attribute --check`'s."""

from __future__ import annotations

import csv
import html as htmllib
import json
import re
from decimal import Decimal

import pytest
import yaml

from browserkit import chromium, console_lines, dumped_dom
from conftest import require_binary
from test_report_bills import spendlake

from service.report.render import VALUE_LIMIT

pytestmark = [pytest.mark.binary, pytest.mark.slow]  # a headless Chromium per test

LONG = "A" * 400  # a run id and an invoice id no space breaks
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "</td></tr></table><h1>BROKEN</h1>",
           "<style>body{display:none}</style>", "<svg onload=alert(3)>", "=HYPERLINK(\"http://x\")", "{{7*7}}"]
# the wrapper of each table: its scroll width and the width it shows (read by a probe, below)
PROBE = ('<script>for (const t of document.querySelectorAll("table[data-table]")) {const w = t.parentElement; '
         't.setAttribute("data-w", w.scrollWidth + "/" + w.clientWidth);}</script>')


def hostile_lake(root):
    """Two p5 instances for three days (80.005 an hour: the bill's rounding shows too), a credit,
    and six jobs of three runs (two with failures launched again), every text hostile."""
    (root / "bill").mkdir()
    with open(root / "bill" / "nov.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["BilledCost", "EffectiveCost", "BillingCurrency", "BillingAccountId", "InvoiceId",
                      "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
                      "ChargeCategory", "ServiceName", "ResourceId", "SubAccountId", "x_instance_type", "Tags"])
        period = ["2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"]
        for hour in range(72):
            start, end = (f"2026-11-{1 + h // 24:02d}T{h % 24:02d}:00:00Z" for h in (hour, hour + 1))
            for n, instance in enumerate(("i-a", "i-b")):
                out.writerow(["80.005", "80.005", "USD", HOSTILE[n], f"{HOSTILE[3 - n]}-{LONG}", *period, start, end,
                              "Usage", HOSTILE[4], instance, HOSTILE[5], "p5.48xlarge",
                              json.dumps({"team": HOSTILE[0], "project": HOSTILE[6]})])
        out.writerow(["-2.125", "-2.125", "USD", HOSTILE[0], "", *period, "2026-11-01T00:00:00Z",
                      "2026-11-02T00:00:00Z", "Credit", HOSTILE[3], "", HOSTILE[5], "", "{}"])
    (root / "jobs").mkdir()
    with open(root / "jobs" / "jobs.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["job_id", "start_time", "end_time", "gpus", "instance_ids", "cluster", "state", "run_id", "user",
                      "team", "experiment", "job_type", "name"])
        for job, start, end, gpus, instance, state, run in [
                ("1", "01T00", "01T06", 8, "i-a", "FAILED", HOSTILE[0]),
                ("2", "01T07", "01T09", 8, "i-a", "NODE_FAIL", HOSTILE[0]),
                ("3", "01T10", "02T10", 8, "i-a", "COMPLETED", HOSTILE[0]),
                ("4", "01T00", "02T00", 4, "i-b", "TIMEOUT", HOSTILE[1]),
                ("5", "02T01", "03T00", 8, "i-b", "COMPLETED", HOSTILE[1]),
                ("6", "02T12", "03T12", 4, "i-a", "CANCELLED", LONG)]:
            out.writerow([HOSTILE[6] + job, f"2026-11-{start}:00:00Z", f"2026-11-{end}:00:00Z", gpus, instance,
                          HOSTILE[2], state, run, HOSTILE[3], HOSTILE[0], HOSTILE[4], HOSTILE[4 - int(job) % 2],
                          HOSTILE[2]])
    config = root / "spendlake.yaml"
    config.write_text(yaml.safe_dump({
        "lake": str(root / "lake"), "sources": [{"name": "bill", "kind": "focus", "location": str(root / "bill")}],
        "inventory": [{"name": "jobs", "kind": "jobs-file", "path": str(root / "jobs")}],
        "attribution": {"clusters": {}}, "rules": {"failed-reruns": {"min_cost_usd": 1}},
        "budgets": [{"name": "hostile-team", "dimension": "team", "value": HOSTILE[0], "amount": 100},
                    {"name": "hostile-cluster", "dimension": "cluster", "value": HOSTILE[2], "amount": 50}]}))
    for command in (["ingest"], ["inventory"], ["rules", "run"], ["report", "--date", "2026-11-03", "--out",
                                                                   str(root / "out")]):
        assert spendlake(config, *command).exit_code == 0, command
    return config, root / "out" / "2026-11-03"


def test_hostile_runs_clusters_invoices_and_budgets_run_nothing_keep_the_layout_and_tie_out(tmp_path):
    binary = require_binary("chromium")
    config, folder = hostile_lake(tmp_path)
    page = folder / "report.html"
    dom, dumped = dumped_dom(binary, tmp_path, page.as_uri())
    (root,) = dom.tags("html")
    assert root.get("data-report-ok") == f"{len(dom.tags('svg'))}:{len(dom.tags('table'))}"  # our script ran
    assert len(dom.tags("script")) == len(dom.tags("style")) == len(dom.tags("h1")) == 1  # ours, nothing made
    assert dom.tags("img") == [] and not [a for _, a in dom.elements if any(k.startswith("on") for k in a)]
    assert console_lines(dumped) == []
    text = htmllib.unescape(dumped.stdout.replace("<wbr>", ""))
    # each value is shown as text, the 400-character id cut to its first VALUE_LIMIT - 1 and `…` (tidy41)
    assert all(value in text for value in [*HOSTILE, LONG[:VALUE_LIMIT - 1] + "…"]), "each value is shown, as text"
    data = json.loads((folder / "report.json").read_text())
    tables = {t["key"]: t for s in data["sections"] for t in s["tables"]}
    assert {r["run"] for r in tables["top_runs"]["rows"]} == {HOSTILE[0], HOSTILE[1], LONG}
    assert {f["resource_id"] for f in tables["open_findings"]["rows"]} == {f"run:{HOSTILE[0]}", f"run:{HOSTILE[1]}"}

    # the layout: a 400-character run id or invoice id made its table 4x the page wide (the amounts
    # off screen); it wraps now, and the invoices fit
    probe = tmp_path / "probe.html"
    probe.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
                     .replace("</body>", PROBE + "</body>"))
    widths = {key: tuple(map(int, w.split("/"))) for key, w in re.findall(
        r'data-table="([^"]+)" data-w="(\d+/\d+)"', chromium(binary, tmp_path, "--window-size=1280,2000",
                                                               "--dump-dom", probe.as_uri()).stdout)}
    assert widths["invoices"][0] <= widths["invoices"][1]
    assert all(scroll < 1.5 * shown for scroll, shown in widths.values()), widths

    # the totals: month to date is `attribute`'s, the bill is what `attribute --check` reconciles
    check = json.loads(spendlake(config, "attribute", "--check", "--format", "json").output)
    [billed] = [c for c in check if c["cost"] == "billed"]
    [bill] = tables["bills"]["rows"]
    assert Decimal(bill["billed_cost"]) == Decimal(billed["source_total"]) == Decimal(billed["attributed_total"])
    attributed = json.loads(spendlake(config, "attribute", "--since", "2026-11-01", "--until", "2026-11-04",
                                      "--format", "json").output)
    [mtd] = [r for r in tables["totals"]["rows"] if r["window"] == "mtd"]
    [total] = attributed["totals"]
    assert Decimal(mtd["cost"]) == Decimal(total["cost"]) == 144 * Decimal("80.005") - Decimal("2.125")
    assert sum(Decimal(r["billed_cost"]) for r in tables["invoices"]["rows"]) == Decimal(bill["billed_cost"])
    # 5,760.36 twice and the credit's -2.13 make 11,518.59; the bill, 11,518.595, shows 11,518.60
    assert "add up to $11,518.59; the bill's lines add up to $11,518.595" in tables["invoices"]["notes"][0]
