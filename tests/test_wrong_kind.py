"""A real export under a source of the wrong kind fails (exit 3) naming what the file looks
like and the kind that reads it, beside the column it lacks."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from billing_helpers import failures, ingest_files
from click.testing import CliRunner
from conftest import SAMPLES

from service.cli.main import cli

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
AZURE_FOCUS = SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"
LEGACY_CUR = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"
GCP = SAMPLES / "gcp" / "koku_gcp_standard_export_202011.csv"
AZURE_EA = SAMPLES / "azure" / "ea_actual_anonymous_sample.csv"


def failure_of(tmp_path, name: str, content: str, kind: str) -> str:
    """The one failure of ingesting a file `name` holding `content` under a source of `kind`."""
    path = tmp_path / name
    path.write_text(content)
    _, result = ingest_files(tmp_path, ("wrong", kind, path))
    [error] = failures(result)
    return error


@pytest.mark.parametrize("sample, kind, expected", [
    (FOCUS, "aws-cur", "it looks like a FOCUS cost and usage file: kind focus reads it"),
    (AZURE_FOCUS, "azure-cost", "it looks like a FOCUS cost and usage file: kind focus reads it"),
    (LEGACY_CUR, "focus", "it looks like an AWS legacy Cost and Usage Report (CUR): kind aws-cur reads it"),
    (GCP, "focus", "it looks like a Google Cloud Billing export: kind gcp-billing reads it"),
    (AZURE_EA, "gcp-billing", "it looks like an Azure cost details export: kind azure-cost reads it"),
    (FOCUS, "gcp-billing", "it looks like a FOCUS cost and usage file: kind focus reads it"),
])
def test_a_sample_under_the_wrong_kind_names_the_kind_that_reads_it(tmp_path, sample, kind, expected):
    folder = tmp_path / "export"
    folder.mkdir()
    shutil.copy(sample, folder / sample.name)
    _, result = ingest_files(tmp_path, ("wrong", kind, folder))
    [error] = failures(result)
    assert sample.name in error and expected in error


@pytest.mark.parametrize("content, expected", [
    ("SubscriptionGuid,UsageDateTime,MeterCategory,PreTaxCost,Currency\n0000,2024-06-02,Virtual Machines,3.10,USD\n",
     "it looks like Azure pay-as-you-go cost details: kind azure-cost reads it"),
    ("MeterId,MeterName,UnitOfMeasure,UnitPrice,Currency,EffectiveStartDate,EffectiveEndDate\n"
     "m-1,ND96asr v4,1 Hour,27.2,USD,2024-05-01,2024-05-31\n",
     "it looks like an Azure price sheet, which has no costs: point the source at the Azure cost details export "
     "(kind azure-cost)"),
    # the recommendations schema writes `Net Savings`: azure-cost skipped it as that export, the hint said nothing
    ("Location,MeterID,Net Savings,Recommended Quantity,SkuName,Term\neastus,m-1,9000,1,Standard_ND96asr_v4,P1Y\n",
     "it looks like an Azure reservation recommendations export, which has no costs"),
])
def test_azure_files_under_another_kind_name_azure_cost(tmp_path, content, expected):
    assert expected in failure_of(tmp_path, "usage.csv", content, "focus")


@pytest.mark.parametrize("kind", ["gcp-billing", "focus"])
def test_gcp_file_export_says_to_export_to_bigquery(tmp_path, kind):
    """Google's file export to Cloud Storage (header as koku's evidence-2019-06-03.csv has it):
    no invoice month, so no kind reads it; the BigQuery export is what ties out."""
    export = ("Account ID,Line Item,Start Time,End Time,Project,Measurement1,Measurement1 Total Consumption,"
              "Measurement1 Units,Credit1,Credit1 Amount,Credit1 Currency,Cost,Currency,Project Number,"
              "Project ID,Project Name,Project Labels,Description\n01C2AB-2F30E0-1EF054,"
              "com.google.cloud/services/compute-engine/VmimageN1StandardCore,2019-09-16T00:00:00-07:00,"
              "2019-09-17T00:00:00-07:00,244082564888,com.google.cloud/services/compute-engine/"
              "VmimageN1StandardCore,44057,seconds,FreeTrial:Credit-01C2AB-2F30E0-1EF054,-0.386854,USD,"
              "0.386854,USD,244082564888,fine-way-252818,My First Project,,N1 Predefined Instance Core\n")
    error = failure_of(tmp_path, "billing-2019-09-16.csv", export, kind)
    assert "billing-2019-09-16.csv" in error and "Google Cloud's billing file export (CSV to Cloud Storage)" in error
    assert "export billing data to BigQuery instead" in error


def test_gcp_json_file_export_says_so_too(tmp_path):
    """The JSON file export is one pretty-printed JSON array (it was read as JSON lines and failed
    as 'Malformed JSON ... unexpected end of data', as if cut short)."""
    export = json.dumps([{"accountId": "01C2AB-2F30E0-1EF054", "lineItemId": "com.google.cloud/services/"
                         "compute-engine/VmimageN1StandardCore", "startTime": "2019-09-16T00:00:00-07:00",
                         "endTime": "2019-09-17T00:00:00-07:00", "projectNumber": "244082564888",
                         "measurements": [{"measurementId": "x", "sum": "44057", "unit": "seconds"}],
                         "cost": {"amount": "0.386854", "currency": "USD"}}], indent=2)
    error = failure_of(tmp_path, "billing-2019-09-16.json", export, "gcp-billing")
    assert "billing-2019-09-16.json" in error and "Google Cloud's billing file export (JSON to Cloud Storage)" in error


def test_a_file_of_the_right_kind_lacking_a_column_keeps_the_plain_hint(tmp_path):
    export = "BilledCost,BillingPeriodStart,ChargePeriodStart\n1,2024-06-01,2024-06-02\n"
    error = failure_of(tmp_path, "focus.csv", export, "focus")
    assert "required column 'BillingCurrency' is missing" in error and "looks like" not in error


def test_a_focus_0_5_file_is_refused_naming_the_versions_read(tmp_path):
    """FOCUS 0.5 names its charge kind ChargeType: read as 1.x, its taxes and credits would
    count as usage and, without EffectiveCost, the lake would attribute nothing."""
    error = failure_of(tmp_path, "focus05.csv", "BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,"
                       "ChargeType,ServiceName\n10.5,USD,2026-11-01,2026-11-01,Usage,Amazon EC2\n"
                       "2,USD,2026-11-01,2026-11-01,Tax,Tax\n", "focus")
    assert "focus05.csv: a FOCUS file of a version before 1.0 (it has ChargeType, not ChargeCategory)" in error
    assert "spendlake reads FOCUS 1.0 to 1.3: export the data as FOCUS 1.0 or later" in error


@pytest.mark.parametrize("kind", ["focus", "aws-cur", "gcp-billing", "azure-cost"])
def test_an_opencost_allocation_export_says_it_is_no_bill(tmp_path, kind):
    """OpenCost's CSV export (its header as the exporter writes it): costs a cluster's cost model
    spread over workloads, which no kind reads as a bill."""
    columns = ("Date Namespace ControllerKind ControllerName Pod Container CPUCoreUsageAverage CPUCoreRequestAverage "
               "RAMBytesUsageAverage RAMBytesRequestAverage NetworkReceiveBytes NetworkTransferBytes GPUs PVBytes "
               "CPUCost RAMCost NetworkCost PVCost GPUCost TotalCost").split()
    line = "2026-11-01 ml deployment trainer trainer-1 main 3.2 4 1.2e10 1.6e10 0 0 8 0 0.95 0.21 0 0 78.40 79.56".split()
    export = f"{','.join(columns)}\n{','.join(line)}\n"
    error = failure_of(tmp_path, "allocation.csv", export, kind)
    assert "allocation.csv" in error and "it looks like an OpenCost or Kubecost allocation export" in error
    assert "a k8s-pods inventory source reads the pods" in error


def test_the_cli_exits_3_naming_the_file_and_the_kind(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    shutil.copy(LEGACY_CUR, folder / LEGACY_CUR.name)
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                      "sources": [{"name": "cur", "kind": "focus", "location": str(folder)}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 3
    assert LEGACY_CUR.name in result.output and "kind aws-cur reads it" in result.output


def test_bq_extract_avro_files_alone_fail_the_source_naming_what_it_reads(tmp_path):
    """`bq extract` writes Avro by choice: gcp-billing reads the Parquet or JSON it also writes."""
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "billing-000000000000.avro").write_bytes(b"Obj\x01")
    _, result = ingest_files(tmp_path, ("gcp", "gcp-billing", folder))
    [error] = failures(result)
    assert "no Cloud Billing export files (.csv, .csv.gz, .parquet, .json, .jsonl, .json.gz, .jsonl.gz)" in error
    assert "point it at the folder holding the Cloud Billing export files" in error
