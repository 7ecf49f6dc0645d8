"""One bill configured as two sources (service.core.bill_overlap): two declared sources holding the
same cost of one billing account's period are told by the ingest, `status`, `attribute --check`
and /api/v1/status, from the ledger's per-account figures; the Azure actual + amortized pair of one
bill (one cost each) and two accounts' bills are not."""

from __future__ import annotations

import csv
import json
from datetime import date

import duckdb
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from billing_helpers import failures, ingest_files
from conftest import SAMPLES

from connectors.synthetic.billing import generate_organisation
from connectors.synthetic.org import PAYER
from service.cli.main import cli
from service.core import bill_overlap
from service.core.config import load_config
from service.ingest.billing import ingest
from service.serve.app import Api

ACTUAL = SAMPLES / "azure" / "ea_actual_trey_research_small.csv"
AMORTIZED = SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"


def synthetic_bill(tmp_path):
    """The synthetic organisation's three days of 2026-10 as its CUR 2.0 and its FOCUS export."""
    return generate_organisation(tmp_path / "exports", days=3, start=date(2026, 10, 1),
                                 formats=("parquet", "focus-csv"))


def config_file(tmp_path, *sources) -> str:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": name, "kind": kind, "location": str(location)} for name, kind, location in sources]}))
    return str(path)


def overlap_warnings(result) -> list[str]:
    return [w for w in result.warnings if bill_overlap.HINT in w]


def member_exports(tmp_path):
    """The synthetic FOCUS export, its member accounts (SubAccountId, sorted), and the export split into
    `first` (the first member's lines) and `others` (the rest's) under tmp_path; the generation, the
    export's folder, its CSV files and the members."""
    generation = synthetic_bill(tmp_path)
    focus = generation.exports["focus-csv"]
    con = duckdb.connect()
    files = sorted(str(p) for p in focus.rglob("*.csv"))
    members = [row[0] for row in con.execute("SELECT DISTINCT SubAccountId FROM read_csv(?, all_varchar=true) "
                                             "ORDER BY 1", [files]).fetchall()]
    assert len(members) > 1
    for name, kept in (("first", members[:1]), ("others", members[1:])):
        (tmp_path / name).mkdir()
        con.execute(f"COPY (SELECT * FROM read_csv(?, all_varchar=true) WHERE list_contains(?, SubAccountId)) "
                    f"TO '{tmp_path / name / 'focus.csv'}' (HEADER)", [files, kept])
    return generation, focus, files, members


def overlaps_gauge(lake) -> float:
    """spendlake_lake_bill_overlaps as /metrics shows it."""
    from service.serve.families import integrity_families

    [family] = [f for f in integrity_families(lake) if f.name == "spendlake_lake_bill_overlaps"]
    return family.samples[0].value


def test_the_focus_and_the_cur2_export_of_one_payer_as_two_sources_are_told_everywhere(tmp_path):
    generation = synthetic_bill(tmp_path)
    sources = (("aws-cur2", "aws-cur2", generation.exports["parquet"]),
               ("aws-focus", "focus", generation.exports["focus-csv"]))
    lake, result = ingest_files(tmp_path, *sources)
    assert failures(result) == []
    [period] = {p.billing_period: p for p in generation.periods}.values()
    [warning] = overlap_warnings(result)  # main: none (only the same file read twice was told)
    assert warning.startswith(f"sources aws-cur2 and aws-focus hold the same cost of AWS billing account {PAYER[0]} "
                              "for billing period 2026-10: billed cost USD ")
    [overlap] = bill_overlap.lake_overlaps(lake)
    assert overlap.sources == ("aws-cur2", "aws-focus") and [cost for cost, _ in overlap.held] == ["billed", "effective"]
    held = dict(overlap.held)  # each source's sums: the bill's, the generator's own
    assert held == {"billed": (("aws-cur2", period.billed_cost), ("aws-focus", period.billed_cost)),
                    "effective": (("aws-cur2", period.effective_cost), ("aws-focus", period.effective_cost))}
    assert f"(up to USD {period.billed_cost:,.2f} counted twice)" in warning

    path = config_file(tmp_path, *sources)
    status = CliRunner().invoke(cli, ["--config", path, "status", "--format", "table"])
    assert status.exit_code == 0 and f"overlap: {warning}" in status.stderr.replace("\n", " ")
    rows = json.loads(CliRunner().invoke(cli, ["--config", path, "status", "--format", "json"]).stdout)
    assert [(r["source"], r["note"]) for r in rows if r["note_kind"] == "overlap"] == [("aws-cur2", warning)]
    check = CliRunner().invoke(cli, ["--config", path, "attribute", "--check"])
    assert check.exit_code == 0, check.output  # a warning: each source still ties out
    assert f"warning: {warning}" in check.stderr.replace("\n", " ")
    body = json.loads(Api(load_config(path), CollectorRegistry()).handle("/api/v1/status", {}, None).body)
    assert [(n["note_kind"], n["note"]) for n in body["lake_notes"]] == [("overlap", warning)]
    # README: its `sources` are the rows of `status --sources --format json`, whose note rows are `lake_notes`
    shown = json.loads(CliRunner().invoke(cli, ["--config", path, "status", "--sources", "--format", "json"]).stdout)
    assert body["sources"] == [row for row in shown if row["note_kind"] is None]
    assert [(n["source"], n["note_kind"], n["note"]) for n in body["lake_notes"]] == [
        (row["source"], row["note_kind"], row["note"]) for row in shown if row["note_kind"] is not None]


def test_the_azure_actual_and_amortized_exports_of_one_bill_are_no_overlap(tmp_path):
    lake, result = ingest_files(tmp_path, ("azea", "azure-cost", ACTUAL), ("azeam", "azure-cost", AMORTIZED))
    assert failures(result) == [] and overlap_warnings(result) == []
    accounts = {(e.source, a.account, a.billed_cost is None, a.effective_cost is None)
                for e in lake.ledger() for a in e.accounts}
    assert accounts == {("azea", "8611537", False, True), ("azeam", "8611537", True, False)}  # one cost each
    assert bill_overlap.lake_overlaps(lake) == []


def test_a_billing_account_export_and_a_subscription_export_of_one_azure_account_overlap(tmp_path):
    with open(ACTUAL, newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    subscription = rows[0]["SubscriptionId"]
    part = tmp_path / "subscription.csv"
    with open(part, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["SubscriptionId"] == subscription)
    lake, result = ingest_files(tmp_path, ("azure-ea", "azure-cost", ACTUAL), ("azure-sub", "azure-cost", part))
    assert failures(result) == []
    [warning] = overlap_warnings(result)
    assert warning.startswith("sources azure-ea and azure-sub hold the same cost of Microsoft billing account 8611537 "
                              "for billing period 2023-09: billed cost USD ")
    [overlap] = bill_overlap.lake_overlaps(lake)
    [(cost, sums)] = overlap.held  # an actual-cost export: no effective cost in either
    assert cost == "billed" and overlap.twice(sums) == min(value for _, value in sums)


def test_two_accounts_bills_are_no_overlap(tmp_path):
    generation = synthetic_bill(tmp_path)
    focus = generation.exports["focus-csv"]
    other = tmp_path / "other-payer"
    con = duckdb.connect()
    for path in sorted(focus.rglob("*.csv")):
        target = other / path.relative_to(focus)
        target.parent.mkdir(parents=True, exist_ok=True)
        con.execute(f"COPY (SELECT * REPLACE ('123456789012' AS BillingAccountId) FROM read_csv(?, all_varchar=true)) "
                    f"TO '{target}' (HEADER)", [str(path)])
    lake, result = ingest_files(tmp_path, ("aws-cur2", "aws-cur2", generation.exports["parquet"]),
                                ("other-payer", "focus", other))
    assert failures(result) == [] and overlap_warnings(result) == []
    assert {(e.source, a.account) for e in lake.ledger() for a in e.accounts} == {
        ("aws-cur2", PAYER[0]), ("other-payer", "123456789012")}
    assert bill_overlap.lake_overlaps(lake) == []


def test_a_ledger_written_before_the_accounts_is_read_for_them_by_the_next_ingest(tmp_path):
    """Entries without `accounts` (ledgers before 2026-12-06) are not compared; the next ingest, with
    nothing new, reads each one's file for them (ledger_accounts, in Lake.restamp) and tells the overlap."""
    generation = synthetic_bill(tmp_path)
    sources = (("aws-cur2", "aws-cur2", generation.exports["parquet"]),
               ("aws-focus", "focus", generation.exports["focus-csv"]))
    lake, result = ingest_files(tmp_path, *sources)
    [told] = overlap_warnings(result)
    recorded = {e.key: e.accounts for e in lake.ledger()}
    ledger = json.loads(lake.ledger_file.read_text())
    for entry in ledger["entries"]:
        del entry["accounts"]
    lake.ledger_file.write_text(json.dumps(ledger))
    assert {e.accounts for e in lake.ledger()} == {None} and bill_overlap.lake_overlaps(lake) == []
    again = ingest(load_config(config_file(tmp_path, *sources)))
    assert failures(again) == [] and {o.status for o in again.outcomes} == {"unchanged"}
    assert overlap_warnings(again) == [told]  # main: no accounts, nothing told
    assert {e.key: e.accounts for e in lake.ledger()} == recorded


def test_member_accounts_own_exports_under_one_payer_are_no_overlap_and_the_gauge_counts_overlaps(tmp_path):
    """The synthetic FOCUS export split by member account (SubAccountId) into two sources, each member's
    own export of the payer: the same billing account, no line in common, told as one bill summed twice
    (overlap48's false alarm). The sub-accounts the lines carry tell them apart; a ledger of session 48
    (accounts without them) has them read by the next ingest. spendlake_lake_bill_overlaps counts the
    overlaps: 0 here, 1 for the FOCUS and CUR 2.0 exports of one payer."""
    from service.core.lake import Lake

    generation, focus, _, members = member_exports(tmp_path)
    sources = (("first", "focus", tmp_path / "first"), ("others", "focus", tmp_path / "others"))
    lake, result = ingest_files(tmp_path, *sources)
    assert failures(result) == [] and overlap_warnings(result) == []  # main: told as one bill summed twice
    assert {(e.source, a.account, a.sub_accounts) for e in lake.ledger() for a in e.accounts} == {
        ("first", PAYER[0], tuple(members[:1])), ("others", PAYER[0], tuple(members[1:]))}
    assert bill_overlap.lake_overlaps(lake) == [] and overlaps_gauge(lake) == 0
    ledger = json.loads(lake.ledger_file.read_text())
    for entry in ledger["entries"]:
        for account in entry["accounts"]:
            del account["sub_accounts"]  # as session 48's commits wrote them
    lake.ledger_file.write_text(json.dumps(ledger))
    assert len(bill_overlap.lake_overlaps(Lake(lake.root))) == 1  # only the account compared
    again = ingest(load_config(config_file(tmp_path, *sources)))
    assert failures(again) == [] and overlap_warnings(again) == []
    assert bill_overlap.lake_overlaps(Lake(lake.root)) == []

    both = tmp_path / "both"
    both.mkdir()
    lake, result = ingest_files(both, ("aws-cur2", "aws-cur2", generation.exports["parquet"]), ("aws-focus", "focus", focus))
    assert len(overlap_warnings(result)) == 1 and overlaps_gauge(lake) == 1


def test_two_member_exports_beside_one_export_without_sub_accounts_are_two_overlaps_not_one_of_three(tmp_path):
    """Three sources of one payer's period: its FOCUS export split by member account into two (each
    carrying its own SubAccountIds, none in common) and the whole export with SubAccountId empty. The
    whole may hold each member's lines; the two members hold none of each other's. Told as one bill of
    all three (the members each said to hold the other's cost, up to both members' sums counted
    twice); told as two pairs, each member with the whole, counting the member's sum twice at most.
    spendlake_lake_bill_overlaps counts the billing account's period once."""
    _, _, files, members = member_exports(tmp_path)
    (tmp_path / "whole").mkdir()
    duckdb.connect().execute(f"COPY (SELECT * REPLACE (NULL AS SubAccountId, NULL AS SubAccountName) FROM read_csv(?, "
                f"all_varchar=true)) TO '{tmp_path / 'whole' / 'focus.csv'}' (HEADER)", [files])
    lake, result = ingest_files(tmp_path, *((name, "focus", tmp_path / name) for name in ("first", "others", "whole")))
    assert failures(result) == []
    assert {(e.source, a.sub_accounts) for e in lake.ledger() for a in e.accounts} == {
        ("first", tuple(members[:1])), ("others", tuple(members[1:])), ("whole", ())}
    billed = {e.source: sum(t.billed_cost for t in e.totals) for e in lake.ledger()}
    found = bill_overlap.lake_overlaps(lake)
    assert [o.sources for o in found] == [("first", "whole"), ("others", "whole")]  # main: one of all three
    for overlap, member in zip(found, ("first", "others")):
        sums = dict(overlap.held)["billed"]
        assert dict(sums) == {member: billed[member], "whole": billed["whole"]}
        assert overlap.twice(sums) == billed[member]
    told = overlap_warnings(result)
    assert len(told) == 2 and not any("first" in line and "others" in line for line in told)
    assert overlaps_gauge(lake) == 1
