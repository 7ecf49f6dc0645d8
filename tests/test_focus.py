"""FOCUS connector: producer quirks, typed Parquet, folders, S3, and bad input."""

from __future__ import annotations

import gzip
from datetime import datetime, timezone
from decimal import Decimal

import boto3
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aws_exports import local_put, write_cur2
from billing_helpers import failures, ingest_files, sums
from moto import mock_aws

from service.ingest.status import status

HEADER = "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,ProviderName,Tags"


def focus_csv(*rows: str, header: str = HEADER) -> bytes:
    """A FOCUS CSV as Microsoft writes it: UTF-8 BOM and CRLF line ends."""
    return ("\ufeff" + "\r\n".join((header,) + rows) + "\r\n").encode("utf-8")


QUIRKY = focus_csv(
    '0.10,0.09,USD,2024-06-01T00:00Z,2024-06-12T00:00Z,2024-06-13T00:00Z,Microsoft,'
    '"{"" org"": ""trey"",""n"": 3,""flag"": true,""none"": null,""nested"": {""a"": [1]}}"',
    "1.81E-8,1.7E-8,USD,2024-06-01 00:00:00,2024-06-12 01:00:00,NULL,AWS,NULL",
    "-0.000000014584512,0,USD,2024-06-01T00:00:00Z,2024-06-12T02:00:00.000Z,,AWS,{}",
)


def test_quirky_csv_keeps_exact_money_utc_times_and_tags_as_written(tmp_path):
    path = tmp_path / "focus.csv"
    path.write_bytes(QUIRKY)
    lake, result = ingest_files(tmp_path, ("focus", "focus", path))
    assert failures(result) == []
    rows = lake.query().execute(
        "SELECT BilledCost, EffectiveCost, BillingPeriodStart, ChargePeriodStart, ChargePeriodEnd, ProviderName, Tags "
        "FROM costs ORDER BY ChargePeriodStart").fetchall()
    assert [r[0] for r in rows] == [Decimal("0.10"), Decimal("1.81E-8"), Decimal("-0.000000014585")]
    assert [r[1] for r in rows] == [Decimal("0.09"), Decimal("1.7E-8"), 0]  # an empty one fails: test_focus_empty_costs
    assert {r[2] for r in rows} == {datetime(2024, 6, 1)}
    assert [r[3] for r in rows] == [datetime(2024, 6, 12), datetime(2024, 6, 12, 1), datetime(2024, 6, 12, 2)]
    assert rows[0][4] == datetime(2024, 6, 13) and rows[1][4] is None
    assert [r[5] for r in rows] == ["Microsoft", "AWS", "AWS"]
    assert rows[0][6] == {" org": "trey", "n": "3", "flag": "true", "none": None, "nested": '{"a":[1]}'}
    assert rows[1][6] is None and rows[2][6] == {}


def test_csv_gz_and_a_folder_of_parts_add_up_and_reingest_is_a_no_op(tmp_path):
    folder = tmp_path / "export" / "2024-06"
    folder.mkdir(parents=True)
    (folder / "part_0.csv.gz").write_bytes(gzip.compress(focus_csv(
        "1.5,1.5,USD,2024-06-01T00:00Z,2024-06-02T00:00Z,,AWS,")))
    (folder / "part_1.csv").write_bytes(focus_csv("2.25,2,USD,2024-06-01T00:00Z,2024-06-03T00:00Z,,AWS,"))
    (folder / "manifest.json").write_text("{}")  # not an export file: ignored
    lake, result = ingest_files(tmp_path, ("focus", "focus", tmp_path / "export"))
    assert failures(result) == [] and [o.status for o in result.outcomes] == ["committed"]
    assert sums(lake) == [("AWS", "USD", 2, Decimal("3.75"), Decimal("3.5"))]
    _, again = ingest_files(tmp_path, ("focus", "focus", tmp_path / "export"))
    assert [o.status for o in again.outcomes] == ["unchanged"]


def test_aws_data_exports_layout_reads_only_what_the_newest_manifest_lists(tmp_path):
    """AWS delivers FOCUS through Data Exports (CREATE_NEW_REPORT here): two executions of
    June, only the newer counts; July has data but no manifest yet, so it waits."""
    root = tmp_path / "exports"
    put = local_put(root)
    old = gzip.compress(focus_csv("1,1,USD,2024-06-01,2024-06-02,,AWS,"))
    new = gzip.compress(focus_csv("2,2,USD,2024-06-01,2024-06-02,,AWS,", "3,3,USD,2024-06-01,2024-06-03,,AWS,"))
    write_cur2(put, prefix="focus", export="focus-export", period="2024-06", execution="exec-1", parts=[old],
               fmt="csv", delivery_folder="20240602T000000Z")
    write_cur2(put, prefix="focus", export="focus-export", period="2024-06", execution="exec-2", parts=[new],
               fmt="csv", delivery_folder="20240603T000000Z")
    write_cur2(put, prefix="focus", export="focus-export", period="2024-07", execution="exec-3", parts=[old],
               fmt="csv", manifest=False)
    lake, result = ingest_files(tmp_path, ("focus", "focus", root / "focus"))
    assert failures(result) == []
    assert sorted((o.status, o.delivery.delivery_id) for o in result.outcomes)[0] == ("committed", "exec-2")
    assert [o.status for o in result.outcomes if o.status == "waiting"] == ["waiting"]
    assert sums(lake, "billing_period") == [("2024-06", 2, Decimal("5"), Decimal("5"))]


def test_files_beside_an_aws_data_exports_layout_fail_rather_than_go_unread(tmp_path):
    """One location holding AWS's FOCUS export (read by its manifests) and another provider's
    FOCUS files: those files are in no manifest, so they fail naming them (exit 3) instead of
    being left out of the lake without a word; the AWS periods still commit."""
    root = tmp_path / "focus"
    write_cur2(local_put(root / "aws"), prefix="", export="focus-export", period="2024-06", execution="exec-1",
               parts=[gzip.compress(focus_csv("2,2,USD,2024-06-01,2024-06-02,,AWS,"))], fmt="csv")
    azure = root / "azure" / "2024-06"
    azure.mkdir(parents=True)
    (azure / "part_0.csv").write_bytes(focus_csv("5,5,USD,2024-06-01,2024-06-02,,Microsoft,"))
    lake, result = ingest_files(tmp_path, ("focus", "focus", root))
    assert sorted(o.status for o in result.outcomes) == ["committed", "failed"]
    [error] = failures(result)
    assert "1 FOCUS file under this location is in no AWS Data Exports manifest: azure/2024-06/part_0.csv" in error
    assert "give those files their own source" in error
    assert sums(lake) == [("AWS", "USD", 1, Decimal("2"), Decimal("2"))]


def test_typed_parquet_money_times_and_map_tags(tmp_path):
    utc = pa.timestamp("us", tz="UTC")
    table = pa.table({
        "BilledCost": pa.array([0.1, 1e-8], pa.float64()),
        "EffectiveCost": pa.array([Decimal("0.05"), 0], pa.decimal128(20, 10)),
        "BillingCurrency": ["EUR", "EUR"],
        "BillingPeriodStart": pa.array([datetime(2024, 7, 1, tzinfo=timezone.utc)] * 2, utc),
        "ChargePeriodStart": pa.array([datetime(2024, 7, 2, tzinfo=timezone.utc), datetime(2024, 7, 3)], utc),
        "ServiceProviderName": ["Google Cloud", "Google Cloud"],
        "Tags": pa.array([[(" team", "a")], []], pa.map_(pa.string(), pa.string())),
    })
    pq.write_table(table, tmp_path / "focus.parquet")
    lake, result = ingest_files(tmp_path, ("focus", "focus", tmp_path / "focus.parquet"))
    assert failures(result) == []
    assert sums(lake) == [("Google Cloud", "EUR", 2, Decimal("0.10000001"), Decimal("0.05"))]
    tags = lake.query().execute("SELECT Tags FROM costs ORDER BY ChargePeriodStart").fetchall()
    assert tags == [({" team": "a"},), ({},)]


# BigQuery has no map type: Google's FOCUS export table, written out by `bq extract` as
# Parquet, holds Tags as repeated {key, value, x_type, x_inherited, x_namespace} records.
BIGQUERY_TAG = pa.struct([("key", pa.string()), ("value", pa.string()), ("x_type", pa.string()),
                          ("x_inherited", pa.bool_()), ("x_namespace", pa.string())])


# Its x_Credits are the row's credits: ARRAY<STRUCT<Name, Amount NUMERIC, FullName, Id, Type>>.
BIGQUERY_CREDIT = pa.struct([("Name", pa.string()), ("Amount", pa.decimal128(38, 9)), ("FullName", pa.string()),
                             ("Id", pa.string()), ("Type", pa.string())])


def bigquery_focus(tags: list, **extra: pa.Array) -> pa.Table:
    utc = pa.timestamp("us", tz="UTC")
    rows = len(tags)
    return pa.table({
        "BilledCost": pa.array([Decimal("11.060000000")] * rows, pa.decimal128(38, 9)),
        "BillingCurrency": ["USD"] * rows,
        "BillingPeriodStart": pa.array([datetime(2025, 6, 1, tzinfo=timezone.utc)] * rows, utc),
        "ChargePeriodStart": pa.array([datetime(2025, 6, 2, h, tzinfo=timezone.utc) for h in range(rows)], utc),
        "ServiceProviderName": ["Google Cloud"] * rows,
        "Tags": pa.array(tags, pa.list_(BIGQUERY_TAG)),
        **extra,
    })


def test_bigquery_tags_as_key_value_records_become_the_tags_map(tmp_path):
    label = {"key": "team", "value": "llm", "x_type": "label", "x_inherited": False, "x_namespace": ""}
    tag = {"key": "env", "value": "prod", "x_type": "tag", "x_inherited": True, "x_namespace": "123456789012"}
    pq.write_table(bigquery_focus([[label, tag], [], None]), tmp_path / "focus-000000000000.parquet")
    lake, result = ingest_files(tmp_path, ("gcp", "focus", tmp_path / "focus-000000000000.parquet"))
    assert failures(result) == []
    assert sums(lake) == [("Google Cloud", "USD", 3, Decimal("33.18"), None)]
    tags = lake.query().execute("SELECT Tags FROM costs ORDER BY ChargePeriodStart").fetchall()
    assert tags == [({"team": "llm", "env": "prod"},), ({},), (None,)]


def test_googles_credit_records_are_summed_into_x_credits(tmp_path):
    """Google's FOCUS view (bq extract to Parquet) has x_Credits, each row's credit records; it
    failed the file as 'column x_Credits: not a number'. x_credits is their sum, as gcp-billing's
    is, and the costs stay as given. By hand: -1.25 + -2.5 = -3.75, no credits 0, null 0."""
    def credit(name: str, amount: str) -> dict:
        return {"Name": name, "Amount": Decimal(amount), "FullName": None, "Id": "", "Type": "SUSTAINED_USAGE_DISCOUNT"}

    credits = pa.array([[credit("SUD", "-1.25"), credit("CUD", "-2.5")], [], None], pa.list_(BIGQUERY_CREDIT))
    project = pa.array([{"id": "ml-prod", "number": "123"}] * 3)
    pq.write_table(bigquery_focus([[], [], []], x_Credits=credits, x_Project=project), tmp_path / "focus.parquet")
    lake, result = ingest_files(tmp_path, ("gcp", "focus", tmp_path / "focus.parquet"))
    assert failures(result) == []
    assert sums(lake) == [("Google Cloud", "USD", 3, Decimal("33.18"), None)]
    got = lake.query().execute("SELECT x_credits FROM costs ORDER BY ChargePeriodStart").fetchall()
    assert got == [(Decimal("-3.75"),), (Decimal(0),), (Decimal(0),)]


def test_a_key_under_several_x_types_takes_the_resources_own_label(tmp_path):
    """Google's FOCUS view lists a resource's labels, tags, project labels and system labels in
    one Tags list: a project labelled team=pretrain holding a resource labelled team=posttrain
    has `team` twice, and the whole file failed as 'a key given twice'. The resource's own label
    wins (as gcp-billing overlays the project's labels), then its tag, then the project's label."""
    def tag(key: str, value: str, x_type: str) -> dict:
        return {"key": key, "value": value, "x_type": x_type, "x_inherited": x_type != "label", "x_namespace": ""}

    rows = [[tag("team", "pretrain", "project_label"), tag("team", "posttrain", "label"), tag("env", "prod", "tag"),
             tag("env", "dev", "project_label"), tag("goog-k8s-cluster-name", "c1", "system_label")],
            [tag("team", "pretrain", "project_label"), tag("team", "eval", "tag")]]
    pq.write_table(bigquery_focus(rows), tmp_path / "focus.parquet")
    lake, result = ingest_files(tmp_path, ("gcp", "focus", tmp_path / "focus.parquet"))
    assert failures(result) == []
    assert lake.query().execute("SELECT Tags FROM costs ORDER BY ChargePeriodStart").fetchall() == [
        ({"team": "posttrain", "env": "prod", "goog-k8s-cluster-name": "c1"},), ({"team": "eval"},)]


def test_a_tag_key_two_namespaces_give_keeps_each_under_its_namespaced_name(tmp_path):
    """An organization's tag `env` and a project's tag `env` on one resource failed the file as 'a
    key given twice within one x_type'; each is kept as `<namespace>/env`, as gcp-billing reads them."""
    def tag(value: str, namespace: str) -> dict:
        return {"key": "env", "value": value, "x_type": "tag", "x_inherited": True, "x_namespace": namespace}

    pq.write_table(bigquery_focus([[tag("prod", "123456789012"), tag("canary", "ml-prod")], [tag("dev", "ml-prod")]]),
                   tmp_path / "focus.parquet")
    lake, result = ingest_files(tmp_path, ("gcp", "focus", tmp_path / "focus.parquet"))
    assert failures(result) == []
    assert lake.query().execute("SELECT Tags FROM costs ORDER BY ChargePeriodStart").fetchall() == [
        ({"123456789012/env": "prod", "ml-prod/env": "canary"},), ({"env": "dev"},)]


def test_enumerated_values_in_another_case_are_read_in_focus_spelling(tmp_path):
    """Google's FOCUS view writes ChargeCategory 'usage', 'tax', 'adjustment', ChargeClass
    'correction' and PricingCategory 'committed'/'standard': the idle-GPU rule (ChargeCategory
    'Usage'), commitment usage and the unallocated rule (leaving 'Tax' out) compared them exactly and
    missed every line. They are read as FOCUS spells them; a value FOCUS does not allow ('error',
    the view's for an unknown cost type) stays as written."""
    extra = {"ChargeCategory": ["usage", "TAX", "adjustment", "error"],
             "ChargeClass": [None, None, "correction", None],
             "PricingCategory": ["committed", "standard", None, "on demand"]}
    pq.write_table(bigquery_focus([[]] * 4, **{k: pa.array(v, pa.string()) for k, v in extra.items()}),
                   tmp_path / "focus.parquet")
    lake, result = ingest_files(tmp_path, ("gcp", "focus", tmp_path / "focus.parquet"))
    assert failures(result) == []
    assert lake.query().execute("SELECT ChargeCategory, ChargeClass, PricingCategory FROM costs "
                                "ORDER BY ChargePeriodStart").fetchall() == [
        ("Usage", None, "Committed"), ("Tax", None, "Standard"), ("Adjustment", "Correction", None),
        ("error", None, "on demand")]


def test_bigquery_tags_with_a_key_twice_fail_naming_file_and_column(tmp_path):
    twice = [{"key": "env", "value": v, "x_type": "label", "x_inherited": False, "x_namespace": ""} for v in "ab"]
    pq.write_table(bigquery_focus([twice]), tmp_path / "focus.parquet")
    _, result = ingest_files(tmp_path, ("gcp", "focus", tmp_path / "focus.parquet"))
    [error] = failures(result)
    assert "column Tags: a key missing or given twice" in error and error.count(str(tmp_path / 'focus.parquet')) == 1


def test_padded_blank_and_infinite_cells_read_as_written(tmp_path):
    """Times and tags are parsed as given and trimmed only where that fails (the cheaper
    parse): padded values still parse, blank ones are NULL, ±infinity stays as before."""
    path = write(tmp_path, "focus.csv", focus_csv(
        '1,1,USD, 2024-06-01T00:00Z ,  2024-06-12 03:00:00+02:00  , infinity ,AWS," {""a"": ""b""} "',
        "2,2,USD,2024-06-01,2024-06-13T00:00:00.000Z,   ,AWS,   "))
    lake, result = ingest_files(tmp_path, ("focus", "focus", path))
    assert failures(result) == []
    rows = lake.query().execute("SELECT BillingPeriodStart, ChargePeriodStart, ChargePeriodEnd, Tags FROM costs "
                                "ORDER BY BilledCost").fetchall()
    assert rows == [(datetime(2024, 6, 1), datetime(2024, 6, 12, 1), datetime.max, {"a": "b"}),
                    (datetime(2024, 6, 1), datetime(2024, 6, 13), None, None)]
    path = write(tmp_path, "focus.csv", focus_csv("1,1,USD,2024-06-01,  June 2nd ,,AWS,"))
    [message] = failures(ingest_files(tmp_path, ("focus", "focus", path))[1])
    assert "column ChargePeriodStart: not a date/time: June 2nd" in message
    assert message.count(str(path)) == 1  # the value's error names its file, and so does the failure: once


def test_typed_parquet_infinite_times_and_decimals_that_may_not_fit(tmp_path):
    """A TIMESTAMPTZ keeps ±infinity; a decimal type with more integer digits than the lake's
    is checked value by value (out of range fails), one with fewer is cast as it is."""
    utc = pa.timestamp("us", tz="UTC")
    def parquet(cost: pa.Array) -> None:
        pq.write_table(pa.table({
            "BilledCost": cost, "BillingCurrency": ["USD"],
            "BillingPeriodStart": pa.array([datetime(2024, 7, 1, tzinfo=timezone.utc)], utc),
            "ChargePeriodStart": pa.array([datetime(2024, 7, 2, tzinfo=timezone.utc)], utc),
            "ChargePeriodEnd": pa.array([datetime(2024, 7, 3, tzinfo=timezone.utc)], utc)}), tmp_path / "focus.parquet")
    parquet(pa.array([Decimal("12345678901234567890123456")], pa.decimal128(38, 0)))
    lake, result = ingest_files(tmp_path, ("focus", "focus", tmp_path / "focus.parquet"))
    assert failures(result) == []
    assert sums(lake)[0][3] == Decimal("12345678901234567890123456")
    parquet(pa.array([Decimal("123456789012345678901234567")], pa.decimal128(38, 0)))
    [message] = failures(ingest_files(tmp_path, ("focus", "focus", tmp_path / "focus.parquet"))[1])
    assert "column BilledCost: out of range: 123456789012345678901234567" in message
    with duckdb.connect() as con:
        con.execute("COPY (SELECT 1.5::DECIMAL(38,18) AS BilledCost, 'USD' AS BillingCurrency, "
                    "TIMESTAMPTZ '2024-07-01 00:00:00+00' AS BillingPeriodStart, "
                    "TIMESTAMPTZ '2024-07-02 00:00:00+00' AS ChargePeriodStart, "
                    "TIMESTAMPTZ 'infinity' AS ChargePeriodEnd) TO '" + str(tmp_path / "focus.parquet") + "'")
    lake, result = ingest_files(tmp_path, ("focus", "focus", tmp_path / "focus.parquet"))
    assert failures(result) == []
    assert lake.query().execute("SELECT ChargePeriodEnd, BilledCost FROM costs").fetchall() == [
        (datetime.max, Decimal("1.5"))]


def test_two_currencies_in_one_period_are_kept_apart(tmp_path):
    path = tmp_path / "focus.csv"
    path.write_bytes(focus_csv("1,1,USD,2024-06-01,2024-06-02,,AWS,", "2,2,EUR,2024-06-01,2024-06-02,,AWS,"))
    lake, result = ingest_files(tmp_path, ("focus", "focus", path))
    assert failures(result) == []
    entries = [(e["billing_period"], e["currency"], e["billed_cost"]) for e in status(lake)]
    assert entries == [("2024-06", "EUR", "2.000000000000"), ("2024-06", "USD", "1.000000000000")]


def test_focus_from_s3(tmp_path):
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="exports")
        s3.put_object(Bucket="exports", Key="focus/2024-06/part_0.csv", Body=QUIRKY)
        s3.put_object(Bucket="exports", Key="focus/2024-06/part_1.csv.gz",
                      Body=gzip.compress(focus_csv("5,5,USD,2024-06-01,2024-06-20,,AWS,")))
        lake, result = ingest_files(tmp_path, ("focus", "focus", "s3://exports/focus"))
    assert failures(result) == []
    assert sums(lake) == [("AWS", "USD", 3, Decimal("5.000000018100") - Decimal("0.000000014585"), Decimal("5.000000017")),
                          ("Microsoft", "USD", 1, Decimal("0.1"), Decimal("0.09"))]
    assert lake.ledger()[0].files == ("s3://exports/focus/2024-06/part_0.csv", "s3://exports/focus/2024-06/part_1.csv.gz")


# ---- bad input: the delivery fails alone, the message names the file and what is wrong --------

def write(tmp_path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("missing.csv", focus_csv("1,USD,2024-06-01", header="BilledCost,BillingCurrency,BillingPeriodStart"),
     ["missing.csv", "required column 'ChargePeriodStart' is missing"]),
    ("badcost.csv", focus_csv("1,1,USD,2024-06-01,2024-06-02,,AWS,", "1,1,USD,2024-06-01,2024-06-02,,AWS,",
                              "12,3O,USD,2024-06-01,2024-06-02,,AWS,"),
     ["badcost.csv", "line 4, column EffectiveCost: could not convert '3O'"]),
    ("badtime.csv", focus_csv("1,1,USD,2024-06-01,June 2nd,,AWS,"),
     ["badtime.csv", "column ChargePeriodStart: not a date/time: June 2nd"]),
    ("badtags.csv", focus_csv('1,1,USD,2024-06-01,2024-06-02,,AWS,"{""a"": 1"'),
     ["badtags.csv", "column Tags: not a JSON object"]),
    ("duptags.csv", focus_csv('1,1,USD,2024-06-01,2024-06-02,,AWS,"{""a"": ""1"", ""a"": ""2""}"'),
     ["duptags.csv", "column Tags: not a JSON object with unique keys"]),
    ("latin1.csv", focus_csv("1,1,USD,2024-06-01,2024-06-02,,AWS,").replace(b"AWS", "Société".encode("latin-1")),
     ["latin1.csv", "not utf-8"]),
    ("resaved.csv", focus_csv("1,1,USD,2024-06-01,2024-06-02,,AWS,,123412345678",
                              "1,1,USD,2024-06-01,2024-06-02,,AWS,,1.23412E+11", header=HEADER + ",SubAccountId"),
     ["resaved.csv", "column SubAccountId: a number in scientific notation", "1.23412E+11",
      "not through a spreadsheet"]),
    ("empty.csv", b"", ["empty.csv", "the file is empty"]),
    ("truncated.csv.gz", gzip.compress(focus_csv(*["1,1,USD,2024-06-01,2024-06-02,,AWS,"] * 2000))[:-200],
     ["truncated.csv.gz"]),
])
def test_bad_input_fails_the_delivery_naming_file_and_problem(tmp_path, name, content, expected):
    path = write(tmp_path, name, content)
    lake, result = ingest_files(tmp_path, ("focus", "focus", path))
    [message] = failures(result)
    for part in expected:
        assert part in message
    assert lake.ledger() == []


def test_bad_file_leaves_the_committed_period_intact(tmp_path):
    path = write(tmp_path, "focus.csv", focus_csv("7,7,USD,2024-06-01,2024-06-02,,AWS,"))
    lake, _ = ingest_files(tmp_path, ("focus", "focus", path))
    write(tmp_path, "focus.csv", focus_csv("7,x,USD,2024-06-01,2024-06-02,,AWS,"))
    _, result = ingest_files(tmp_path, ("focus", "focus", path))
    assert len(failures(result)) == 1
    assert sums(lake) == [("AWS", "USD", 1, Decimal("7"), Decimal("7"))]


@pytest.mark.parametrize("invoice_column", ["InvoiceId", "x_InvoiceId"])
def test_invoice_id_makes_the_period_final(tmp_path, invoice_column):
    header = "BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart," + invoice_column
    path = write(tmp_path, "focus.csv", focus_csv("1,USD,2024-06-01,2024-06-02,INV-1", header=header))
    lake, result = ingest_files(tmp_path, ("focus", "focus", path))
    assert failures(result) == []
    [entry] = lake.ledger()
    assert entry.final
    assert lake.query().execute("SELECT InvoiceId FROM costs").fetchall() == [("INV-1",)]


def test_data_exports_manifest_naming_a_missing_file_fails_that_period_alone(tmp_path):
    root = tmp_path / "exports"
    put = local_put(root)
    body = gzip.compress(focus_csv("2,2,USD,2024-06-01,2024-06-02,,AWS,"))
    write_cur2(put, prefix="", export="fx", period="2024-06", execution="exec-6", parts=[body], fmt="csv")
    [missing] = write_cur2(put, prefix="", export="fx", period="2024-07", execution="exec-7", parts=[body], fmt="csv")
    (root / missing.removeprefix("s3://bucket/")).unlink()
    lake, result = ingest_files(tmp_path, ("focus", "focus", root / "fx"))
    [message] = failures(result)
    assert "fx-00001.csv.gz" in message and "BILLING_PERIOD=2024-07" in message
    assert sums(lake, "billing_period") == [("2024-06", 1, Decimal("2"), Decimal("2"))]


def test_ids_that_only_resemble_scientific_notation_are_kept(tmp_path):
    """Only a whole value like 1.23412E+11 is a spreadsheet's rewrite; ids holding 'E+' are kept."""
    ids = ["123412345678", "arn:aws:ec2:1.2E+3", "1.2E+3x"]
    path = write(tmp_path, "ids.csv", focus_csv(*[f"1,1,USD,2024-06-01,2024-06-02,,AWS,,{i}" for i in ids],
                                                header=HEADER + ",ResourceId"))
    lake, result = ingest_files(tmp_path, ("focus", "focus", path))
    assert failures(result) == []
    with lake.query() as con:
        assert sorted(r[0] for r in con.execute("SELECT ResourceId FROM costs").fetchall()) == sorted(ids)
