"""A `_state/*.json` file or the ledger of the wrong shape (edited by hand, restored from
elsewhere) is named with its key, exit 3, never a traceback from the reader that relied on
it; the file-periods cache is only a cache: read as empty and written anew."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, time, timedelta, timezone

import pytest
import yaml
from click.testing import CliRunner

from conftest import SAMPLES
from prometheus_client import CollectorRegistry

from service.cli.main import cli
from service.core.errors import DataError
from service.core.lake import Lake
from service.serve.metrics import JobMetrics
from service.serve.scheduler import ServiceScheduler, Tasks

SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
DAMAGED = [  # (state, content, what the error says), each once a traceback
    ("sources", [], "(top level): must be a mapping"),  # AttributeError: 'list' object has no attribute 'get'
    ("sources", {"bill": "ok"}, "bill: must be a mapping"),  # TypeError: 'str' object does not support item assignment
    ("sources", {"bill": {"failures_total": "abc"}}, "bill.failures_total: must be a whole number"),  # int('abc')
    ("sources", {"bill": {"last_success": "yesterday"}}, "bill.last_success: must be a time"),  # fromisoformat
    ("verify", {"problems": [{"source": 1}]}, "problems[0].source: must be text"),  # KeyError: 'billing_period'
]


@pytest.fixture
def ingested(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "bill", "kind": "focus", "location": str(tmp_path / "export")}]}))
    assert spendlake(config, "ingest").exit_code == 0
    return config, tmp_path / "lake" / "_state"


def spendlake(config, *args):
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


@pytest.mark.parametrize("state, content, said", DAMAGED, ids=[f"{s}-{n}" for n, (s, _, _) in enumerate(DAMAGED)])
def test_a_state_file_of_the_wrong_shape_is_named_with_its_key(ingested, state, content, said):
    config, folder = ingested
    (folder / f"{state}.json").write_text(json.dumps(content))
    for command in (["status", "--sources"] if state == "sources" else ["status"], ["report", "--date", "2024-09-20"]):
        result = spendlake(config, *command)
        assert result.exit_code == 3, (command, result.output)
        assert f"{folder / state}.json: state file is unreadable: {said}" in result.output, result.output
        assert "delete it to start afresh" in result.output


@pytest.mark.parametrize("state, said", [({"daily": {"last_run_date": "yesterday"}}, "daily.last_run_date"),
                                         ({"daily_undone": ["last week"]}, "daily_undone[0]")])
def test_a_daily_run_date_edited_to_other_words_is_named_not_a_traceback_at_serve_start(ingested, state, said):
    """`spendlake serve` asks the scheduler's state whether the day's report is due: 'yesterday'
    was a ValueError traceback from date.fromisoformat as the service started."""
    config, folder = ingested
    (folder / "jobs.json").write_text(json.dumps(state))
    scheduler = ServiceScheduler(Lake(folder.parent), JobMetrics(CollectorRegistry(), ()),
                                 Tasks(ingest=lambda: None, rules=None, daily=lambda day: None),
                                 ingest_every=timedelta(hours=1), daily_at=time(6))
    with pytest.raises(DataError) as failed:
        scheduler.daily_due(datetime(2026, 11, 30, 7, tzinfo=timezone.utc))
    assert failed.value.where == str(folder / "jobs.json") and failed.value.exit_code == 3
    assert f"state file is unreadable: {said}: must be a date such as 2026-11-30" in failed.value.message


def test_a_file_periods_cache_of_the_wrong_shape_is_read_as_empty_and_written_anew(ingested):
    config, folder = ingested
    (folder / "file_periods.json").write_text("[]")  # was: 'list' object has no attribute 'get'
    # another file (a copy of the sample would be skipped as one, read for nothing)
    (folder.parent.parent / "export" / "more.csv").write_bytes(b"".join(SAMPLE.read_bytes().splitlines(True)[:-1]))
    result = spendlake(config, "ingest")
    assert result.exit_code == 0, result.output
    assert isinstance(json.loads((folder / "file_periods.json").read_text())["bill"], dict)


LEDGER_DAMAGE = [  # (change to the ledger's JSON, what the error says), each once a traceback or Python's words
    (lambda d: d["entries"][0]["totals"][0].update(billed_cost="abc"),
     "entries[0].totals[0].billed_cost: must be a number written as text, such as '12.50', not 'abc'"),  # was:
    # decimal.InvalidOperation, a traceback
    (lambda d: d["entries"][0].pop("totals"), "entries[0].totals: is required but missing"),  # was: "'totals'"
    (lambda d: d.update(entries="x"), "entries: must be a list"),  # was: "string indices must be integers"
    # each was a TypeError traceback from the reader that relied on the type (Lake.has_delivery, the
    # status table, coverage), or read a text as true
    (lambda d: d["entries"][0].update(reader_version="1"), "entries[0].reader_version: must be a whole number"),
    (lambda d: d["entries"][0].update(rows="1000"), "entries[0].rows: must be a whole number"),
    (lambda d: d["entries"][0].update(size=-1), "entries[0].size: must be at least 0"),
    (lambda d: d["entries"][0].update(final="no"), "entries[0].final: must be true or false"),
    (lambda d: d["entries"][0].update(ingested_at="yesterday"), "entries[0].ingested_at: must be a time"),
    (lambda d: d["entries"][0].update(data_through=20240930), "entries[0].data_through: must be text"),
    (lambda d: d["entries"][0].update(tag_keys="team"), "entries[0].tag_keys: must be a list"),
    (lambda d: d.update(pending=[{}]), "pending[0].source: is required but missing"),
    # each read as a folder of the lake: "invalid billing_period value '../../../etc' for a lake partition",
    # naming no file, from every command, `ingest` failing the source for good; `status` offered `forget ../x`
    (lambda d: d["entries"][0].update(billing_period="../../../etc"),
     "entries[0].billing_period: must name a lake partition's folder"),
    (lambda d: d["entries"][0].update(source="../x"), "entries[0].source: must name a lake partition's folder"),
    (lambda d: d["entries"].append(d["entries"][0]), "entries[2]: bill 2024-09 is listed twice"),  # status: twice
    # a day sum's day edited to what is no day ('2024-9-31', '30/09/2024') was read as one: compared as text, it
    # counted as no day or another, and the report's restatement note said the wrong days' figures, no word of it
    (lambda d: next(iter(d["entries"][0]["days"].values())).update({"2024-9-31": ["1", "1"]}),
     "entries[0].days.USD.2024-9-31: must be a day such as 2026-11-30"),
]


@pytest.mark.parametrize("damage, said", LEDGER_DAMAGE, ids=["cost", "totals", "entries", "reader_version", "rows",
                                                              "size", "final", "ingested_at", "data_through",
                                                              "tag_keys", "pending", "period", "source",
                                                              "twice", "day"])
def test_a_damaged_ledger_entry_is_named_by_its_place(ingested, damage, said):
    config, folder = ingested
    ledger = folder.parent / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    damage(data)
    ledger.write_text(json.dumps(data))
    for command in (["status"], ["ingest"], ["attribute", "--since", "30d"]):
        result = spendlake(config, *command)
        assert result.exit_code == 3, (command, result.output)
        assert f"{ledger}: the delivery ledger is unreadable: {said}" in result.output, (command, result.output)
        # the hint's new ledger leaves out the months the exports no longer hold: their partitions unlisted for good
        assert "correct what it names" in result.output and "not the periods the sources no longer hold" in \
            result.output, result.output
