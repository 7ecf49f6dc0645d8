"""Azure cost details CSV `Tags` (JSON, braces optional) converted by the stager once per
distinct value (service.core.per_value), as FOCUS and CUR 2.0 CSV tags are: the lake holds
exactly the maps the per-line SQL gives, and a bad object fails the delivery naming the file
and column. Figures: bench/README.md (bench/azure_bench.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from service.core.errors import DataError
from service.ingest.billing import ingest
from tests.test_tags_per_value import config, lake_tags, per_value_and_per_line

TAGS = ['"env": "prod","team": "nlp"', '{"env": "dev"}', "", '"team": "vision","n": 3', "{}",
        ' {"team": "nlp", "project": ""} ']


def azure_export(folder: Path, rows: int, tags: list[str]) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "costs.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["Date", "Cost", "BillingCurrency", "ChargeType", "Tags"])
        writer.writerows([["06/01/2024", n, "USD", "Usage", tags[n % len(tags)]] for n in range(rows)])
    return folder


def test_azure_tags_converted_once_per_distinct_value_equal_the_per_line_conversion(tmp_path, monkeypatch):
    export = azure_export(tmp_path / "export", 2_000, TAGS)
    converted, kept, by_line = per_value_and_per_line(tmp_path, monkeypatch, "azure-cost", export)
    # the four FOCUS times of the file's one date text once each (azure_dates), each tags text at most once
    assert 0 < converted - 4 <= len(TAGS) and kept == by_line
    assert {tags for _, tags in kept} >= {"{env=prod, team=nlp}", "{env=dev}", "{}"}


@pytest.mark.parametrize("bad", ['"a": "1","a": "2"', '{"a": '])
def test_a_bad_azure_tags_text_fails_the_delivery_naming_file_and_column(tmp_path, bad):
    export = azure_export(tmp_path / "export", 10, [*TAGS[:3], bad])
    [outcome] = ingest(config(tmp_path / "lake", "azure-cost", export)).outcomes
    assert isinstance(outcome.error, DataError), outcome
    assert "costs.csv" in str(outcome.error) and "Tags" in str(outcome.error)
