"""gpu-metrics connector: a real Prometheus holding backfilled DCGM series, CloudWatch
(moto) and local files. Utilisation per GPU and per instance, hourly, partitioned by day."""

from __future__ import annotations

import json
import socket
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from prometheus_support import answering_prometheus, backfilled_prometheus, free_port, serving
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

DATA = Path(__file__).parent / "data" / "inventory" / "gpu"
# Three days back: old enough to lie in backfilled blocks, well inside the retention.
DAY0 = (datetime.now(timezone.utc) - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
FIRST_HOUR = DAY0 - timedelta(hours=4)  # data from 20:00 the day before to 05:00 on DAY0
HOURS = 9


def sm_active_gpu1(hour: int) -> float:
    return 0.02 if hour < 4 else 0.6  # idle for the first four hours


def openmetrics(families: dict | None = None) -> str:
    """DCGM exporter series, one sample a minute at :30 so each falls inside one hour."""
    families = families or {
        "DCGM_FI_PROF_SM_ACTIVE": [('gpu="0",instance_id="i-0aaa",Hostname="node-a"', lambda h: 0.9),
                                   ('gpu="1",instance_id="i-0aaa",Hostname="node-a"', sm_active_gpu1),
                                   ('gpu="0",Hostname="no-instance-label"', lambda h: 0.5)],
        # i-0aaa also reports GPU_UTIL: ignored, SM active is preferred. i-0bbb only has GPU_UTIL.
        "DCGM_FI_DEV_GPU_UTIL": [('gpu="0",instance_id="i-0aaa"', lambda h: 77.0),
                                 ('gpu="0",instance_id="i-0bbb"', lambda h: 3.0),
                                 ('gpu="1",instance_id="i-0bbb"', lambda h: 3.0)],
    }
    lines = []
    for name, series in families.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in series:
            for minute in range(HOURS * 60):
                ts = FIRST_HOUR.timestamp() + minute * 60 + 30
                lines.append(f"{name}{{{labels}}} {value(minute // 60)} {ts:.0f}")
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """A real Prometheus on 127.0.0.1 serving backfilled DCGM series; stopped afterwards."""
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), openmetrics()) as url:
        yield url


def run(tmp_path: Path, now: datetime, **source):
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "gpus", "kind": "gpu-metrics", **source}]})
    [outcome] = run_inventory(config, now=now)
    return outcome


def rows(tmp_path: Path, where: str = "true"):
    con = Lake(tmp_path / "lake").query()
    try:
        return con.execute(f"SELECT resource_id, gpu, hour, util_pct, metric, day FROM gpu_utilization "
                           f"WHERE {where} ORDER BY resource_id, gpu NULLS LAST, hour").fetchall()
    finally:
        con.close()


@pytest.mark.binary
def test_prometheus_dcgm_per_gpu_and_per_instance(tmp_path, prometheus):
    now = DAY0 + timedelta(hours=5, minutes=10)
    outcome = run(tmp_path, now, prometheus_url=prometheus, lookback_hours=12)
    assert outcome.error is None, outcome.error
    day_before, day0 = (DAY0 - timedelta(days=1)).date().isoformat(), DAY0.date().isoformat()
    assert outcome.rows == {f"gpu_utilization day={day_before}": 4 * 6, f"gpu_utilization day={day0}": 5 * 6}

    hours = [(FIRST_HOUR + timedelta(hours=h)).replace(tzinfo=None) for h in range(HOURS)]
    a_gpu0 = rows(tmp_path, "resource_id = 'i-0aaa' AND gpu = 0")
    assert [r[2] for r in a_gpu0] == hours
    assert all(r[3] == pytest.approx(90.0) and r[4] == "DCGM_FI_PROF_SM_ACTIVE" for r in a_gpu0)
    a_gpu1 = rows(tmp_path, "resource_id = 'i-0aaa' AND gpu = 1")
    assert [r[3] for r in a_gpu1] == pytest.approx([2.0] * 4 + [60.0] * 5)
    a_total = rows(tmp_path, "resource_id = 'i-0aaa' AND gpu IS NULL")
    assert [r[3] for r in a_total] == pytest.approx([46.0] * 4 + [75.0] * 5)
    assert [r[5] for r in a_total] == [day_before] * 4 + [day0] * 5

    b = rows(tmp_path, "resource_id = 'i-0bbb'")
    assert {(r[1], r[4]) for r in b} == {(0, "DCGM_FI_DEV_GPU_UTIL"), (1, "DCGM_FI_DEV_GPU_UTIL"),
                                         (None, "DCGM_FI_DEV_GPU_UTIL")}
    assert len(b) == 3 * HOURS and all(r[3] == pytest.approx(3.0) for r in b)
    assert {r[0] for r in rows(tmp_path)} == {"i-0aaa", "i-0bbb"}  # the unlabelled series is left out

    # A later run overlapping the same days replaces them: no hour is counted twice.
    assert run(tmp_path, now + timedelta(hours=1), prometheus_url=prometheus, lookback_hours=12).error is None
    assert len(rows(tmp_path)) == HOURS * 6  # 2 instances x (2 GPUs + aggregate)


@pytest.mark.binary
def test_a_mig_gpus_use_is_its_instances_each_at_its_share(tmp_path):
    """dcgm-exporter reports a MIG GPU per GPU instance only, each instance's activity relative to
    itself: averaged, a GPU holding one busy 1g.10gb slice read 100% (its other 6/7 unused, never
    partitioned) and 4g.40gb at 20% beside 3g.40gb at 90% read 55%. Each is its share now."""
    mig = 'instance_id="i-0ccc",Hostname="node-c",modelName="NVIDIA A100-SXM4-40GB"'
    text = openmetrics({"DCGM_FI_PROF_SM_ACTIVE": [
        (f'gpu="0",{mig},GPU_I_ID="7",GPU_I_PROFILE="1g.10gb"', lambda h: 1.0),
        (f'gpu="1",{mig},GPU_I_ID="1",GPU_I_PROFILE="4g.40gb"', lambda h: 0.2),
        (f'gpu="1",{mig},GPU_I_ID="2",GPU_I_PROFILE="3g.40gb"', lambda h: 0.9),
        ('gpu="0",instance_id="i-0aaa"', lambda h: 0.9)]})  # a whole GPU beside them, as before
    with backfilled_prometheus(tmp_path, text) as url:
        assert run(tmp_path, DAY0 + timedelta(hours=5, minutes=10), prometheus_url=url, lookback_hours=12).error is None
    use = {(r[0], r[1]): r[3] for r in rows(tmp_path)}
    # 100% x 1/7; 20% x 4/7 + 90% x 3/7 = (80 + 270) / 7; the instance the mean of its GPUs
    assert use == {("i-0ccc", 0): pytest.approx(100 / 7), ("i-0ccc", 1): pytest.approx(50.0),
                   ("i-0ccc", None): pytest.approx((100 / 7 + 50) / 2), ("i-0aaa", 0): pytest.approx(90.0),
                   ("i-0aaa", None): pytest.approx(90.0)}

@pytest.mark.binary
def test_prometheus_wrong_instance_label_says_which_label_to_set(tmp_path, prometheus):
    outcome = run(tmp_path, DAY0 + timedelta(hours=5), prometheus_url=prometheus, instance_label="ec2_instance")
    assert "carry no 'ec2_instance' label" in str(outcome.error) and "instance_label" in str(outcome.error)
    assert prometheus in str(outcome.error)


def test_prometheus_unreachable_names_the_url(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    outcome = run(tmp_path, DAY0, prometheus_url=url, timeout_seconds=2, max_attempts=2)
    assert f"{url}/api/v1/query_range: cannot reach it after 2 attempt(s)" in str(outcome.error)
    assert str(outcome.error).endswith("or raise inventory[0].max_attempts / inventory[0].timeout_seconds"), \
        outcome.error


def test_a_prometheus_query_is_tried_up_to_max_attempts(tmp_path):
    """A Prometheus behind a proxy answering 503 while it restarts: each query is asked again up to
    max_attempts in all, as slurm-jobs and k8s-pods ask theirs, where gpu-metrics asked once
    whatever max_attempts said and failed the source on the first 503."""
    series = {"metric": {"instance_id": "i-0aaa", "gpu": "0"},
              "values": [[(DAY0 + timedelta(hours=h)).timestamp(), "0.5"] for h in (1, 2)]}
    matrix = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [series]}}).encode()
    asked: list[str] = []

    def restarting(path: str, headers) -> tuple[int, bytes]:
        asked.append(path)
        return (503, b'{"status": "error", "error": "restarting"}') if len(asked) <= 2 else (200, matrix)

    with serving(restarting) as url:
        outcome = run(tmp_path, DAY0 + timedelta(hours=2, minutes=10), prometheus_url=url, lookback_hours=2,
                      metrics=["DCGM_FI_PROF_SM_ACTIVE"], max_attempts=3)
        assert outcome.error is None, outcome.error
        assert len(asked) == 3
        assert [(r[0], r[1], r[3]) for r in rows(tmp_path, "gpu = 0")] == [("i-0aaa", 0, 50.0)] * 2
        asked.clear()
        outcome = run(tmp_path / "two", DAY0 + timedelta(hours=2, minutes=10), prometheus_url=url,
                      lookback_hours=2, metrics=["DCGM_FI_PROF_SM_ACTIVE"], max_attempts=2)
    assert f"{url}/api/v1/query_range: answered HTTP 503 after 2 attempts: restarting" in str(outcome.error)
    assert len(asked) == 2


@pytest.mark.parametrize("answer", ["503", "silent"])
def test_the_sources_queries_end_by_its_deadline_retries_included(tmp_path, answer):
    """A Prometheus restarting (503) or not answering held each of the three metrics' queries
    max_attempts x timeout_seconds and the backoffs between (5 attempts each here, 35 s for the source;
    7.5 minutes and more by default, serve's jobs waiting behind it): all of them now end by
    deadline_seconds, an attempt given what is left of it, none started or waited for past it."""
    asked: list[float] = []

    def failing(path: str, headers) -> tuple[int, bytes]:
        asked.append(time.monotonic())
        if answer == "silent":
            time.sleep(1.5)  # past the client's timeout: it has gone
        return 503, b'{"status": "error", "error": "restarting"}'

    with serving(failing) as url:
        began = time.monotonic()
        outcome = run(tmp_path, DAY0 + timedelta(hours=2, minutes=10), prometheus_url=url, lookback_hours=2,
                      timeout_seconds=1, deadline_seconds=2.5)
        took = time.monotonic() - began
    assert f"{url}/api/v1/query_range: the source's requests were not all answered within 2.5 s " \
           "(inventory[0].deadline_seconds), retries included — raise inventory[0].deadline_seconds" in \
           str(outcome.error), outcome.error
    # counted, not timed (a loaded CI host only slows each attempt): it stopped within the first metric's
    # attempts (503: at 0 s, 0 s and 1 s, the next wait of 2 s past it; silent: at 0 s and 1 s), where 15 were
    # asked without a deadline; its time, generously, below half of those 35 s
    assert 0 < len(asked) < 5 and took < 35 / 2, (took, asked)


@pytest.mark.parametrize("settings, deadline", [({}, 300), ({"timeout_seconds": 600}, 1800),
                                               ({"timeout_seconds": 200, "metrics": ["DCGM_FI_DEV_GPU_UTIL"]}, 300),
                                               ({"timeout_seconds": 600, "deadline_seconds": 900}, 900),
                                               # CloudWatch: two calls in each region (it counted the metrics: 300)
                                               ({"prometheus_url": None, "cloudwatch": True, "timeout_seconds": 60,
                                                 "regions": ["us-east-1", "eu-west-1", "ap-south-1"]}, 6 * 60)])
def test_the_deadline_by_default_gives_each_metric_its_timeout(settings, deadline):
    """review51 item 5: a deadline of 300 s whatever timeout_seconds is cut a config with timeout_seconds raised to
    600 whose three metrics' queries each came in within it: by default it is one timeout_seconds a metric when
    that is more than 300 s."""
    config = parse_config({"inventory": [{"name": "gpus", "kind": "gpu-metrics", "prometheus_url": "http://p:9090",
                                          **settings}]})
    assert config.inventory[0].deadline == deadline


def test_a_deadline_below_timeout_seconds_is_a_config_error():
    with pytest.raises(ConfigError) as raised:
        parse_config({"inventory": [{"name": "gpus", "kind": "gpu-metrics", "prometheus_url": "http://p:9090",
                                     "timeout_seconds": 120, "deadline_seconds": 60}]})
    assert "inventory[0].deadline_seconds: 60 s is less than timeout_seconds (120 s)" in raised.value.message


def test_prometheus_answering_with_warnings_is_partial_and_fails(tmp_path):
    """A Thanos with a store down answers `success` with `warnings` and without that store's
    series: instances missing from a day's GPU use would read as never used."""
    series = {"metric": {"instance_id": "i-0aaa", "gpu": "0"}, "values": [[DAY0.timestamp(), "0.5"]]}
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [series]},
              "warnings": ["No StoreAPIs matched for this query"]}
    with answering_prometheus(answer, []) as url:
        outcome = run(tmp_path, DAY0 + timedelta(hours=5), prometheus_url=url)
    assert "the answer may be partial: No StoreAPIs matched for this query" in str(outcome.error)
    assert not (tmp_path / "lake" / "gpu_utilization").exists()


@mock_aws
def test_cloudwatch_agent_gpu_metrics(tmp_path):
    now = datetime.now(timezone.utc).replace(minute=20)
    last = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    for hour in range(3):
        for index, util in ((0, 80.0), (1, 0.0 if hour < 2 else 40.0)):
            cloudwatch.put_metric_data(Namespace="CWAgent", MetricData=[{
                "MetricName": "nvidia_smi_utilization_gpu", "Value": util, "Unit": "Percent",
                "Timestamp": last - timedelta(hours=hour) + timedelta(minutes=5),
                "Dimensions": [{"Name": "InstanceId", "Value": "i-0ccc"}, {"Name": "index", "Value": str(index)},
                               {"Name": "name", "Value": "NVIDIA H100 80GB HBM3"}]}])
    cloudwatch.put_metric_data(Namespace="CWAgent", MetricData=[{  # no InstanceId: not attributable
        "MetricName": "nvidia_smi_utilization_gpu", "Value": 50.0, "Timestamp": last,
        "Dimensions": [{"Name": "host", "Value": "on-prem-1"}]}])
    outcome = run(tmp_path, now, cloudwatch=True, regions=["us-east-1"], lookback_hours=6)
    assert outcome.error is None, outcome.error
    got = {(r[1], r[2]): r[3] for r in rows(tmp_path)}
    hours = [(last - timedelta(hours=h)).replace(tzinfo=None) for h in range(3)]
    assert {r[0] for r in rows(tmp_path)} == {"i-0ccc"}
    assert got[(0, hours[0])] == 80.0 and got[(1, hours[0])] == 0.0 and got[(1, hours[2])] == 40.0
    assert got[(None, hours[0])] == 40.0 and got[(None, hours[2])] == 60.0
    assert {r[4] for r in rows(tmp_path)} == {"nvidia_smi_utilization_gpu"}


REGIONS = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1",
           "eu-north-1", "ap-south-1", "ap-northeast-1", "sa-east-1"]


@mock_aws
def test_the_cloudwatch_calls_end_by_the_sources_deadline(tmp_path, monkeypatch):
    """CloudWatch had no deadline: each call waited botocore's 60 s connect and 60 s read for each of
    max_attempts, for every region, serve's jobs behind it. Its calls, all regions', now end by
    deadline_seconds as the Prometheus queries do: a CloudWatch answering each call in 1 s held twelve
    regions 12 s; with a 2.5 s deadline none is sent past it and the source fails naming it."""
    from moto.cloudwatch.models import CloudWatchBackend

    asked: list[float] = []
    listed = CloudWatchBackend.list_metrics

    def slow(self, *args, **kwargs):
        asked.append(time.monotonic())
        time.sleep(1)
        return listed(self, *args, **kwargs)

    monkeypatch.setattr(CloudWatchBackend, "list_metrics", slow)
    began = time.monotonic()
    outcome = run(tmp_path, datetime.now(timezone.utc), cloudwatch=True, regions=REGIONS, timeout_seconds=1,
                  deadline_seconds=2.5)
    took = time.monotonic() - began
    assert ": the source's requests were not all answered within 2.5 s (inventory[0].deadline_seconds), retries " \
           "included — raise inventory[0].deadline_seconds, or read a shorter window (inventory[0].lookback_hours) " \
           "or fewer regions (inventory[0].regions)" in str(outcome.error), outcome.error
    assert str(outcome.error).startswith("region "), outcome.error
    # counted, not timed (a loaded CI host only slows each call): each call takes 1 s or more, so none sent past
    # 2.5 s leaves at most three of the twelve regions' calls
    assert 0 < len(asked) <= 3, (took, asked)


def test_a_cloudwatch_endpoint_not_answering_ends_by_the_deadline(tmp_path, monkeypatch):
    """An endpoint that takes the connection and never answers: each attempt's read waited 60 s
    (botocore's), max_attempts times; now timeout_seconds, and all of them end by deadline_seconds."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts: the connect succeeds
        began = time.monotonic()
        outcome = run(tmp_path, datetime.now(timezone.utc), cloudwatch=True, regions=["us-east-1"],
                      endpoint_url=f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_seconds=1,
                      deadline_seconds=2.5)
        took = time.monotonic() - began
    assert "region us-east-1, namespace CWAgent: the source's requests were not all answered within 2.5 s " \
           "(inventory[0].deadline_seconds)" in str(outcome.error), outcome.error
    assert took < 60, (took, outcome.error)  # five attempts of 60 s reads without: generously, below one of them


def test_local_files_add_instance_aggregates(tmp_path):
    outcome = run(tmp_path, datetime(2026, 11, 28, tzinfo=timezone.utc), path=str(DATA))
    assert outcome.error is None, outcome.error
    assert rows(tmp_path, "resource_id = 'i-0ddd'") == [
        ("i-0ddd", 0, datetime(2026, 11, 20, 10), 1.0, "DCGM_FI_PROF_SM_ACTIVE", "2026-11-20"),
        ("i-0ddd", 1, datetime(2026, 11, 20, 10), 3.0, "DCGM_FI_PROF_SM_ACTIVE", "2026-11-20"),
        ("i-0ddd", None, datetime(2026, 11, 20, 10), 2.0, "DCGM_FI_PROF_SM_ACTIVE", "2026-11-20"),
    ]
    # An aggregate given by the file is kept, not recomputed.
    assert rows(tmp_path, "resource_id = 'i-0eee' AND gpu IS NULL")[0][3] == 55.0


def test_a_json_lines_files_field_first_written_at_line_30000_is_read_and_typed_from_every_line(tmp_path):
    """read_json sampled the first 20,480 lines: `gpu`, first written at line 30,000, was no column (the
    line's GPU stored as an instance aggregate, gpu NULL) and a util_pct of 55.5 after whole numbers was
    read as the sample's BIGINT, 56. Its fields and types now come from every line (file_readers.json_reader)."""
    path = tmp_path / "metrics.jsonl"
    lines = [{"resource_id": f"i-{n // 24:05d}", "hour": f"2026-11-20 {n % 24:02d}:00:00", "util_pct": 50}
             for n in range(29_999)]
    lines.append({"resource_id": "i-late", "gpu": 3, "hour": "2026-11-20 05:00:00", "util_pct": 55.5})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    outcome = run(tmp_path, datetime(2026, 11, 28, tzinfo=timezone.utc), path=str(path))
    assert outcome.error is None, outcome.error
    assert rows(tmp_path, "resource_id = 'i-late'") == [
        ("i-late", 3, datetime(2026, 11, 20, 5), 55.5, None, "2026-11-20"),
        ("i-late", None, datetime(2026, 11, 20, 5), 55.5, None, "2026-11-20")]
    assert rows(tmp_path, "resource_id = 'i-00000' AND hour = '2026-11-20 07:00:00'") == [
        ("i-00000", None, datetime(2026, 11, 20, 7), 50.0, None, "2026-11-20")]


def test_a_files_days_are_counted_and_its_data_runs_through_its_latest_hour(tmp_path):
    """Each day's rows are the count its partition's record holds, and the source's data runs
    through the end of the latest hour, read from that day's committed file (not by scanning
    the whole read again for each day); a file of the same rows in another order is read again
    and stores nothing, its days counted as unchanged."""
    path = tmp_path / "metrics.csv"
    lines = [f"i-0aaa,{gpu},2026-11-{day:02d} {hour:02d}:00:00,{10 * gpu + hour}" for day in (20, 21, 22)
             for hour in ((1, 2, 3) if day < 22 else (0, 7)) for gpu in (0, 1)]
    path.write_text("resource_id,gpu,hour,util_pct\n" + "\n".join(reversed(lines)) + "\n")
    now = datetime(2026, 11, 28, tzinfo=timezone.utc)
    for stored in ("rows", "unchanged"):
        outcome = run(tmp_path, now, path=str(path))
        assert outcome.error is None, outcome.error
        assert getattr(outcome, stored) == {  # each hour's two GPUs and the instance aggregate
            "gpu_utilization day=2026-11-20": 9, "gpu_utilization day=2026-11-21": 9,
            "gpu_utilization day=2026-11-22": 6}
        assert outcome.data_through == datetime(2026, 11, 22, 8, tzinfo=timezone.utc)
        path.write_text("resource_id,gpu,hour,util_pct\n" + "\n".join(lines) + "\n")


def test_an_hour_of_several_readings_is_their_mean_and_one_of_one_reading_its_value(tmp_path):
    """Hours of one reading take it as their mean, hours of several the ordered mean of theirs
    (two ways through the hourly rows): both, beside each other, for a GPU, for an aggregate
    the file gives (gpu empty) and for readings without a metric, each day its own part."""
    path = tmp_path / "metrics.csv"
    path.write_text("resource_id,gpu,hour,util_pct,metric\n"
                    "i-0aaa,0,2026-11-20 10:00:00,10,SM\n"
                    "i-0aaa,0,2026-11-20 10:20:00,20,SM\n"
                    "i-0aaa,0,2026-11-20 10:40:00,60,SM\n"
                    "i-0aaa,1,2026-11-20 10:00:00,7,SM\n"
                    "i-0aaa,,2026-11-21 03:00:00,50,SM\n"
                    "i-0aaa,,2026-11-21 03:30:00,70,SM\n"
                    "i-0bbb,0,2026-11-21 03:15:00,5,\n"
                    "i-0bbb,0,2026-11-21 03:45:00,15,\n")
    outcome = run(tmp_path, datetime(2026, 11, 28, tzinfo=timezone.utc), path=str(path))
    assert outcome.error is None, outcome.error
    assert rows(tmp_path) == [
        ("i-0aaa", 0, datetime(2026, 11, 20, 10), 30.0, "SM", "2026-11-20"),
        ("i-0aaa", 1, datetime(2026, 11, 20, 10), 7.0, "SM", "2026-11-20"),
        ("i-0aaa", None, datetime(2026, 11, 20, 10), 18.5, "SM", "2026-11-20"),
        ("i-0aaa", None, datetime(2026, 11, 21, 3), 60.0, "SM", "2026-11-21"),
        ("i-0bbb", 0, datetime(2026, 11, 21, 3), 10.0, None, "2026-11-21"),
        ("i-0bbb", None, datetime(2026, 11, 21, 3), 10.0, None, "2026-11-21"),
    ]
