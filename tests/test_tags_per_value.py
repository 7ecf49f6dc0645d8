"""JSON tags of CSV exports (FOCUS `Tags`, CUR 2.0 `resource_tags`) are converted by the stager
once per distinct value (service.core.per_value), not per line: the lake holds exactly the
maps the per-line SQL gives, a null or blank cell included, whether the converted values
are kept or start again (CACHED_VALUES), and a bad object in any batch fails the delivery
as before, naming the file and column."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pytest

import connectors.aws_common as aws_common
import service.core.per_value as per_value
import service.core.staging as staging
from service.core.config import parse_config
from service.core.errors import DataError
from service.core.lake import Lake
from service.ingest.billing import ingest
from tests.aws_exports import cur2_table, line, local_put, write_cur2

FOCUS_HEADER = "BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,Tags"
FOCUS_TAGS = ['"{""team"": ""nlp""}"', '"{"" org"": ""trey"", ""n"": 3, ""none"": null, ""nested"": {""a"": [1]}}"',
              "", "NULL", "{}", '" {""team"": ""nlp""} "', '"{""team"": ""vision"", ""project"": """"}"']
CUR2_TAGS = ['{"user_team":"nlp"}', '{"user_team":""}', '{"user_team":null,"user_project":"x"}', "{}", "",
             '{"user_team":"vision","user_project":"llama"}']


def config(lake: Path, kind: str, location: Path):
    return parse_config({"lake": str(lake), "sources": [{"name": "bill", "kind": kind, "location": str(location)}]})


def lake_tags(lake: Path) -> list[tuple]:
    """Every row's cost and tags as the lake holds them, sorted."""
    con = duckdb.connect()
    files = [str(p) for p in lake.glob("costs/**/data.parquet")]
    return sorted(con.execute("SELECT BilledCost, CAST(Tags AS VARCHAR) FROM read_parquet(?, hive_partitioning = false)",
                              [files]).fetchall(), key=lambda row: (row[0], row[1] is not None, row[1] or ""))


def focus_export(folder: Path, rows: int, tags: list[str]) -> Path:
    folder.mkdir(parents=True)
    lines = [f"{n},USD,2024-06-01,2024-06-02,{tags[n % len(tags)]}" for n in range(rows)]
    (folder / "focus.csv").write_text("\n".join([FOCUS_HEADER, *lines]) + "\n")
    return folder


def cur2_export(folder: Path, tmp: Path, rows: int, tags: list[str]) -> Path:
    con = duckdb.connect()
    table = cur2_table(con, [line(cost=str(n)) for n in range(rows)])
    table.create_view("cur2")
    con.execute("CREATE TABLE texts AS SELECT * FROM (VALUES " + ", ".join(
        f"({i}, {'NULL' if not t else repr(t)})" for i, t in enumerate(tags)) + ") t(i, text)")
    target = tmp / "part.csv.gz"
    con.execute(f"COPY (SELECT cur2.* REPLACE (texts.text AS resource_tags, CAST(to_json(product) AS VARCHAR) AS product) "
                f"FROM cur2 JOIN texts ON texts.i = (CAST(line_item_unblended_cost AS BIGINT) * 7) % {len(tags)}) "
                f"TO '{target}' (FORMAT csv, HEADER, COMPRESSION gzip)")
    write_cur2(local_put(folder), prefix="", export="cur", period="2026-10", execution="exec-1",
               parts=[target.read_bytes()], fmt="csv")
    return folder / "cur"


def per_line(monkeypatch) -> None:
    """The connectors' per-line SQL for the tags, as before the stager converted them."""
    monkeypatch.setattr(per_value.PerValueSelect, "part", lambda self, con: con.sql(self.sql))
    monkeypatch.setattr(aws_common, "_tags_as_text", lambda columns: False)


@pytest.mark.parametrize("cached", [per_value.CACHED_VALUES, 4])
@pytest.mark.parametrize("kind", ["focus", "aws-cur2"])
def test_tags_converted_once_per_distinct_value_equal_the_per_line_conversion(tmp_path, monkeypatch, kind, cached):
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)  # many batches, each with repeats
    monkeypatch.setattr(per_value, "CACHED_VALUES", cached)
    tags = FOCUS_TAGS if kind == "focus" else CUR2_TAGS
    export = (focus_export(tmp_path / "export", 2_000, tags) if kind == "focus"
              else cur2_export(tmp_path / "export", tmp_path, 2_000, tags))
    rows, converted = [], []
    real = per_value.Converter._column

    def counted(self, column, name, *args):
        rows.extend([len(column)] if name == "Tags" else [])  # a FOCUS CSV's times are converted so too
        return real(self, column, name, *args)
    monkeypatch.setattr(per_value.Converter, "_column", counted)
    run = per_value.Converter._run

    def ran(self, texts, name, *args):
        converted.extend([len(texts)] if name == "Tags" else [])
        return run(self, texts, name, *args)
    monkeypatch.setattr(per_value.Converter, "_run", ran)
    [outcome] = ingest(config(tmp_path / "lake", kind, export)).outcomes
    assert outcome.error is None and sum(rows) == 2_000 and len(rows) >= 7
    # each distinct text converted once (`""` and `NULL` are both a null FOCUS cell), unless the
    # cache is smaller than the texts
    assert (sum(converted) in (len(tags) - 1, len(tags))) if cached > len(tags) else (sum(converted) > len(tags))
    kept = lake_tags(tmp_path / "lake")
    per_line(monkeypatch)
    [outcome] = ingest(config(tmp_path / "lake-per-line", kind, export)).outcomes
    assert outcome.error is None
    assert kept == lake_tags(tmp_path / "lake-per-line")
    assert {tags for _, tags in kept} >= ({"{team=nlp}", "{}", None} if kind == "focus" else {"{user_team=nlp}", "{}"})


def test_tags_unique_per_line_are_converted_in_the_select_not_per_value(tmp_path, monkeypatch):
    # a run-id tag on every line: nothing repeats, so converting per distinct value only added the
    # round trip through Arrow (1M lines: 21.9 CPU s against 16.6 in the SELECT); the head's texts
    # say so and the canonical SELECT is streamed: the same maps, a bad one failing the same way
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)
    export = focus_export(tmp_path / "export", 1_000, [f'"{{""run-id"": ""r{n}""}}"' for n in range(1_000)])
    converted: list[int] = []
    run = per_value.Converter._run
    monkeypatch.setattr(per_value.Converter, "_run", lambda self, texts, *a: converted.append(len(texts)) or run(self, texts, *a))
    [outcome] = ingest(config(tmp_path / "lake", "focus", export)).outcomes
    assert outcome.error is None and converted == []
    kept = lake_tags(tmp_path / "lake")
    assert len({tags for _, tags in kept}) == 1_000 and (999, "{run-id=r999}") in kept
    with open(export / "focus.csv", "a") as out:
        out.write('7,USD,2024-06-01,2024-06-02,"{""a"": ""1"", ""a"": ""2""}"\n')
    [outcome] = ingest(config(tmp_path / "lake-bad", "focus", export)).outcomes
    assert "focus.csv" in str(outcome.error) and "column Tags: not a JSON object with unique keys" in str(outcome.error)
    per_line(monkeypatch)
    (export / "focus.csv").write_text("\n".join((export / "focus.csv").read_text().splitlines()[:-1]) + "\n")
    [outcome] = ingest(config(tmp_path / "lake-per-line", "focus", export)).outcomes
    assert outcome.error is None and kept == lake_tags(tmp_path / "lake-per-line")


def test_a_bad_tags_object_in_a_later_batch_fails_the_delivery_naming_file_and_column(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)
    export = focus_export(tmp_path / "export", 1_000, FOCUS_TAGS)
    with open(export / "focus.csv", "a") as out:
        out.write('7,USD,2024-06-01,2024-06-02,"{""a"": ""1"", ""a"": ""2""}"\n')
    cfg = config(tmp_path / "lake", "focus", export)
    [outcome] = ingest(cfg).outcomes
    assert isinstance(outcome.error, DataError)
    message = str(outcome.error)
    assert "focus.csv" in message and "column Tags: not a JSON object with unique keys" in message
    assert Lake(cfg.lake).ledger() == []


def test_a_csv_gz_focus_export_converts_its_tags_the_same_way(tmp_path, monkeypatch):
    folder = focus_export(tmp_path / "export", 500, FOCUS_TAGS)
    (folder / "focus.csv.gz").write_bytes(gzip.compress((folder / "focus.csv").read_bytes()))
    (folder / "focus.csv").unlink()
    [outcome] = ingest(config(tmp_path / "lake", "focus", folder)).outcomes
    assert outcome.error is None
    per_line(monkeypatch)
    [outcome] = ingest(config(tmp_path / "lake-per-line", "focus", folder)).outcomes
    assert lake_tags(tmp_path / "lake") == lake_tags(tmp_path / "lake-per-line")


def google_focus_view(folder: Path, copies: int, lists: list) -> Path:
    """Google's FOCUS view by bq extract, `lists` (a line each) `copies` times over: Tags as
    repeated {key, value, x_type, x_inherited, x_namespace} records."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.test_focus import bigquery_focus

    folder.mkdir(parents=True)
    pq.write_table(pa.concat_tables([bigquery_focus(lists)] * copies), folder / "focus.parquet")
    return folder


def gtag(key: str, value: str, x_type: str, namespace: str = "") -> dict:
    return {"key": key, "value": value, "x_type": x_type, "x_inherited": x_type != "label", "x_namespace": namespace}


GOOGLE_TAGS = [[gtag("team", "nlp", "label"), gtag("team", "pretrain", "project_label"), gtag("env", "prod", "tag", "org")],
               [gtag("env", "org", "tag", "111"), gtag("env", "proj", "tag", "ml-prod"), gtag("c", "c1", "system_label")],
               [], None, [gtag("team", "vision", "label")]]


def per_value_and_per_line(tmp_path: Path, monkeypatch, kind: str, export: Path) -> tuple[int, list, list]:
    """How many texts the stager converted, the lake's tags, and the tags the per-line SQL gives."""
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)  # many batches, each with repeats
    converted = []
    run = per_value.Converter._run
    monkeypatch.setattr(per_value.Converter, "_run", lambda self, texts, *a: converted.append(len(texts)) or run(self, texts, *a))
    [outcome] = ingest(config(tmp_path / "lake", kind, export)).outcomes
    assert outcome.error is None, outcome.error
    kept = lake_tags(tmp_path / "lake")
    per_line(monkeypatch)
    [outcome] = ingest(config(tmp_path / "lake-per-line", kind, export)).outcomes
    assert outcome.error is None, outcome.error
    return sum(converted), kept, lake_tags(tmp_path / "lake-per-line")


def test_googles_tag_records_are_converted_once_per_distinct_list_as_per_line(tmp_path, monkeypatch):
    """Google's FOCUS view's Tags were ranked, and each tag checked against the whole list, on
    every line (1M lines, ~500 distinct lists of 5-15 records: 91-114 s against 4-8 s for DuckDB's
    bare copy); each distinct list is converted once, from its JSON, to the same maps."""
    export = google_focus_view(tmp_path / "export", 400, GOOGLE_TAGS)
    converted, kept, by_line = per_value_and_per_line(tmp_path, monkeypatch, "focus", export)
    assert converted == len(GOOGLE_TAGS) and kept == by_line
    assert {tags for _, tags in kept} == {"{team=nlp, env=prod}", "{111/env=org, ml-prod/env=proj, c=c1}", "{}",
                                          None, "{team=vision}"}


def test_a_bad_tag_record_list_fails_the_delivery_naming_file_and_column(tmp_path):
    export = google_focus_view(tmp_path / "export", 20, [*GOOGLE_TAGS, [gtag("a", "1", "label"), gtag("a", "2", "label")]])
    [outcome] = ingest(config(tmp_path / "lake", "focus", export)).outcomes
    assert isinstance(outcome.error, DataError)
    assert "focus.parquet" in str(outcome.error)
    assert "column Tags: a key missing or given twice within one x_type: [{'key': a, 'value': 1" in str(outcome.error)
