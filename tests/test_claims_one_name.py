"""One source name, two configs on one lake (service/core/claims.py): an ingest, from the CLI or
serve's job, of a name another config still declares with another kind or location is refused
(exit 2) before it replaces that config's bill; the same bill under both, the same config
edited or moved, ingest as before."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from service.core.claims import _key, endpoint_compared
from service.core.config import load_config
from service.core.errors import SourceError
from service.core.lake import Lake
from service.serve.service import run_ingest
from tests.conftest import SAMPLES
from tests.test_lake_integrity import BILLED, SAMPLE, attributed_total, spendlake

OTHER = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


def config(root: Path, name: str, export: str, sample: Path = SAMPLE, kind: str = "focus") -> Path:
    """`root / name`, reading `sample` in `root / export` as source `trey` into the lake `root / lake`."""
    (root / export).mkdir(exist_ok=True)
    shutil.copy(sample, root / export / sample.name)
    path = root / name
    path.write_text(yaml.safe_dump({"lake": "lake", "sources": [{"name": "trey", "kind": kind, "location": export}]}))
    return path


@pytest.fixture
def first(tmp_path):
    path = config(tmp_path, "finance.yaml", "export")
    assert spendlake(path, "ingest").exit_code == 0
    return path


def test_a_name_another_config_reads_elsewhere_is_refused_naming_it(first, tmp_path):
    second = config(tmp_path, "research.yaml", "export-b", OTHER)
    refused = spendlake(second, "ingest")
    assert refused.exit_code == 3, refused.output  # was 0: "trey 2024-09: committed 999 rows", the bill replaced
    assert f"source 'trey' is read by {first} too, another config on this lake, as focus at {tmp_path / 'export'}; " \
           f"this config reads it as focus at {tmp_path / 'export-b'}" in refused.output
    assert "trey (periods from data): FAILED: sources[0].name: source 'trey' is read by" in refused.output
    assert "point both configs at one location" in refused.output  # a mirror renamed would be counted twice
    assert f"`spendlake --config {first} forget trey`" in refused.output
    assert "rename the source in one config only if the two hold different bills" in refused.output
    with pytest.raises(SourceError, match="another config on this lake"):  # serve's ingest job: its failure
        run_ingest(load_config(second))
    assert attributed_total(first) == BILLED


def test_the_same_bill_the_same_config_edited_or_moved_ingest_as_before(first, tmp_path):
    copy = tmp_path / "copy.yaml"
    shutil.copy(first, copy)  # the same kind and location: one bill, whichever config reads it
    assert spendlake(copy, "ingest").exit_code == 0
    moved = tmp_path / "moved.yaml"
    copy.rename(moved)  # the config that ran it last is gone: its claim with it
    assert spendlake(moved, "ingest").exit_code == 0
    config(tmp_path, "moved.yaml", "export-b", OTHER)  # edited to read elsewhere: the same config
    edited = spendlake(moved, "ingest")
    assert edited.exit_code == 0 and "committed" in edited.output, edited.output
    refused = spendlake(first, "ingest")  # now finance.yaml's ingest would put its bill back: refused in turn
    assert refused.exit_code == 3 and f"read by {moved} too" in refused.output
    first.write_text("sources: [")  # broken, finance.yaml did not run trey last (moved.yaml did): it claims nothing
    assert spendlake(moved, "ingest").exit_code == 0


def test_another_kind_under_the_same_location_is_refused(first, tmp_path):
    second = config(tmp_path, "cur.yaml", "export", kind="aws-cur2")
    refused = spendlake(second, "ingest")
    assert refused.exit_code == 3 and "as focus at" in refused.output and "as aws-cur2 at" in refused.output


def test_a_claimed_name_fails_that_source_alone_the_configs_others_ingest(first, tmp_path):
    second = config(tmp_path, "research.yaml", "export-b", OTHER)
    config(tmp_path, "vision.yaml", "export-c", OTHER)  # its folder
    data = yaml.safe_load(second.read_text())
    data["sources"].append({"name": "vision", "kind": "focus", "location": "export-c"})
    second.write_text(yaml.safe_dump(data))
    result = spendlake(second, "ingest")
    assert result.exit_code == 3, result.output  # was 2, vision not read: "refused" before anything
    assert "FAILED: sources[0].name: source 'trey' is read by" in result.output
    assert "vision 2024-09: committed 999 rows" in result.output
    record = Lake(tmp_path / "lake").read_state("sources")["trey"]
    assert record["config"] == str(first) and not record["last_run_failed"]  # finance.yaml's still, not failed
    assert spendlake(first, "ingest").exit_code == 0 and attributed_total(first) == BILLED


def test_one_s3_prefix_at_two_endpoints_is_two_bills(tmp_path):
    def s3(name: str, port: int) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump({"lake": "lake", "sources": [
            {"name": "cur", "kind": "aws-cur2", "location": "s3://bills/cur/", "max_attempts": 1,
             "endpoint_url": f"http://127.0.0.1:{port}", "region": "us-east-1"}]}))
        return path

    minio = s3("minio.yaml", 9)
    assert spendlake(minio, "ingest").exit_code == 3  # nothing answers; the source is recorded minio.yaml's
    aws = spendlake(s3("aws.yaml", 19), "ingest")  # was read as the same bill: the connection's failure alone
    assert aws.exit_code == 3 and f"source 'cur' is read by {minio} too" in aws.output, aws.output
    assert "at s3://bills/cur/ (endpoint http://127.0.0.1:9); this config reads it as aws-cur2 at " \
           "s3://bills/cur/ (endpoint http://127.0.0.1:19)" in aws.output
    assert spendlake(s3("copy.yaml", 9), "ingest").output.count("is read by") == 0  # the same endpoint: one bill


@pytest.mark.parametrize(("one", "other"), [
    ("http://MinIO:9000", "http://minio:9000/"),
    ("HTTPS://minio.example.com:443/", "https://minio.example.com"),
    ("http://minio:80", "http://minio"),
    ("", "https://s3.amazonaws.com"),
    ("", "https://s3.eu-west-1.amazonaws.com/"),
    ("", "https://S3-us-west-2.amazonaws.com:443"),
    ("http://[::1]:9000", "http://[::1]:9000/"),
])
def test_one_endpoint_written_two_ways_is_one_bill(one, other):
    assert endpoint_compared(one) == endpoint_compared(other)
    sources = [SimpleNamespace(kind="aws-cur2", location="s3://bills/cur/", endpoint_url=url or None)
               for url in (one, other)]
    assert _key(sources[0]) == _key(sources[1])


@pytest.mark.parametrize(("one", "other"), [
    ("http://minio:9000", "http://minio:9001"),
    ("http://minio:9000", "https://minio:9000"),
    ("", "http://minio:9000"),
    ("", "https://s3.amazonaws.com.evil.example"),
    ("", "https://s3.amazonaws.com/other-path"),
    ("http://[::1]:9000", "http://[::1:9000]"),
])
def test_other_endpoints_stay_other_bills(one, other):
    assert endpoint_compared(one) != endpoint_compared(other)
