"""A pod's k8s-pods record across a change of how its window is read: while any GPU request
series of the window has no `uid` (kube-state-metrics v1 for `lookback_hours` after the upgrade
to v2, a relabelled shard) every series is read by name; its record is still `<cluster>/<uid>`
from kube_pod_info, so a pod running across the change is one record, charged its own hours.
A lake whose earlier snapshot holds the by-name record (written before) is settled by the
newest snapshot."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from prometheus_support import backfilled_prometheus

from connectors.k8s_pod_records import PodTable
from service.attribution import RunsQuery, attribute, reconcile, runs
from service.core.job_windows import window_fields
from service.core.timewindow import Window
from tests.attribution_helpers import add_jobs, config, line, make_lake
from tests.test_k8s_pods import at, jobs, openmetrics, snapshot

T0 = datetime(2026, 11, 2, 10, tzinfo=timezone.utc).timestamp()  # w-0 created and started
INSTANCE = "i-0aaa1111bbbb2222c"
HOUR = Window(datetime(2026, 11, 2, 10, tzinfo=timezone.utc), datetime(2026, 11, 2, 11, tzinfo=timezone.utc))
NAMED = f"p5/train/w-0@{T0:.0f}"  # its record read by name before the fix


def pod_rows(*, uid_on_requests: bool, minutes: int, done_at: int | None = None, cluster: str = "p5") -> list[dict]:
    """k8s-pods rows of pod train/w-0 (uid u-w0, 8 GPUs on node n1 = INSTANCE, running from
    10:00), kube-state-metrics scraped each minute for `minutes`; Succeeded from `done_at` (its
    completion time then), the source's `cluster` named `cluster`. Without `uid_on_requests`,
    kube-state-metrics v1: only kube_pod_info carries the uid."""
    scrapes = [T0 + 60 * k for k in range(minutes)]

    def series(values: list[tuple[float, float]], info: bool = False, **labels: str) -> dict:
        uid = {"uid": "u-w0"} if uid_on_requests or info else {}
        return {"metric": {"namespace": "train", "pod": "w-0", **uid, **labels}, "values": values}

    table = PodTable(None, cluster)
    table.add_reported([{"metric": {}, "values": [(t, t) for t in scrapes]}])
    requests = [series([(scrapes[-1], 8.0)], resource="nvidia_com_gpu")]
    table.add_without_uid([s for s in requests if "uid" not in s["metric"]])
    listed = [series([(t, t) for t in scrapes], info=True, node="n1")]
    born = [series([(t, T0) for t in scrapes])]
    table.add_lives(listed, born, born)
    table.add_requests(requests)
    table.add_info(listed)
    table.add_times(born, "created")
    table.add_times(born, "started")
    running = [t for k, t in enumerate(scrapes) if done_at is None or k < done_at]
    phases = [series([(t, t) for t in running], phase="Running")]
    if done_at is not None:
        table.add_times([series([(scrapes[-1], T0 + 60 * done_at)])], "completed")
        phases.append(series([(t, t) for t in scrapes[done_at:]], phase="Succeeded"))
    table.add_phases(phases)
    table.add_nodes([{"metric": {"node": "n1", "provider_id": f"aws:///us-east-1a/{INSTANCE}"},
                      "values": [(t, 1.0) for t in scrapes]}])
    return table.rows(())


@pytest.mark.binary
def test_across_the_kube_state_metrics_upgrade_each_pod_keeps_its_record(tmp_path):
    """kube-state-metrics v1 (uid on kube_pod_info alone) until scrape 180, v2 after: the 8-hour
    window holds both, so it is read by name; the 2-hour one (scrapes 240-359) only v2. Every
    pod has its uid's record in both (eval-mig, pending-big, trainer-0 run across them)."""
    upgrade = at(180).replace(tzinfo=timezone.utc).timestamp()

    def v1_until_upgrade(sample: str) -> str:
        if sample.startswith("kube_") and not sample.startswith("kube_pod_info{") \
                and float(sample.rsplit(" ", 1)[1]) < upgrade:
            return re.sub(r',uid="[^"]*"', "", sample)
        return sample

    text = "\n".join(map(v1_until_upgrade, openmetrics().splitlines())) + "\n"
    assert 'kube_pod_created{namespace="eval",pod="eval-mig"}' in text
    (tmp_path / "prometheus").mkdir()
    with backfilled_prometheus(tmp_path / "prometheus", text) as url:
        for window, hours in (("mixed", 8), ("v2", 2)):
            (tmp_path / window).mkdir()
            assert snapshot(tmp_path / window, prometheus_url=url, lookback_hours=hours).error is None
    uids = ["eks-p5/u-em", "eks-p5/u-pb", "eks-p5/u-t0b", "eks-p5/u-w0", "eks-p5/u-w1"]
    assert [r[0] for r in jobs(tmp_path / "v2", "record_id")] == uids
    assert [r[0] for r in jobs(tmp_path / "mixed", "record_id")] == sorted([*uids, "eks-p5/u-nb", "eks-p5/u-t0a"])


def test_read_by_name_a_pod_keeps_the_record_its_uid_gives():
    """kube_pod_info carries the uid (v1 does): the by-name read gives the same record."""
    assert [r["record_id"] for r in pod_rows(uid_on_requests=False, minutes=20)] == ["p5/u-w0"]
    assert [r["record_id"] for r in pod_rows(uid_on_requests=True, minutes=20)] == ["p5/u-w0"]


@pytest.mark.parametrize("running_shape", ["uid", "v1", "by name before the fix"])
@pytest.mark.parametrize("done_by_name", [True, False])
def test_a_pod_running_across_the_change_is_charged_its_own_half_hour(tmp_path, running_shape, done_by_name):
    # p5.48xlarge $80 the hour on INSTANCE; w-0 holds its 8 GPUs 10:00-10:30: $40, idle $40.
    # The 10:20 snapshot shows it running (no end), the next day's shows it done at 10:30, one
    # read with uids and the other by name: the running record once held the GPUs for ever ($80
    # to w-0 over two records, no idle).
    running = pod_rows(uid_on_requests=running_shape == "uid", minutes=20)
    if running_shape == "by name before the fix":
        running = [row | {"record_id": NAMED} for row in running]
    done = pod_rows(uid_on_requests=not done_by_name, minutes=40, done_at=30)
    assert [(r["state"], r["end_time"]) for r in running + done] == [
        ("RUNNING", None), ("COMPLETED", datetime(2026, 11, 2, 10, 30))]
    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", "80", resource=INSTANCE, instance_type="p5.48xlarge",
                                     tags={"team": "platform"})])
    add_jobs(lake, running, source="k8s", snapshot="2026-11-02")
    add_jobs(lake, done, source="k8s", snapshot="2026-11-03")
    cfg = config({"clusters": {}}, lake)
    result = attribute(lake, cfg, HOUR, by=("run", "job_state"))
    charged = {(r.values["run"], r.values["job_state"]): r.cost for r in result.rows if r.cost}
    assert charged == {("train/w-0", "COMPLETED"): Decimal(40), ("idle", "idle"): Decimal(40)}
    assert all(r.ok for r in reconcile(lake, cfg))
    query = RunsQuery.parse(since="2026-11-02T10:00:00Z", until="2026-11-02T11:00:00Z")
    assert [(r.run, r.gpu_hours, r.cost) for r in runs(lake, cfg, query).rows] == [("train/w-0", 4, Decimal(40))]


RENAMED = ["uid", "by name before the fix, then by uid", "the old name's by name only, then by uid"]


def renamed_lake(tmp_path, running_shape: str):
    """As above, the source's `cluster` renamed p5 -> eks-p5 between the snapshots: the 10:20
    record (ended at 10:20 by the next window, reading from 10:25) and the 11:25 one are one
    pod (its uid); `running_shape` "by name before the fix ...": an earlier snapshot (its date:
    before) holds the by-name record of p5; "... by name only ...": the 10:20 record is read by
    name (no record of p5 has the uid). (lake, config)"""
    running = pod_rows(uid_on_requests=True, minutes=20)
    done = pod_rows(uid_on_requests=True, minutes=40, done_at=30, cluster="eks-p5")
    assert [r["record_id"] for r in done] == ["eks-p5/u-w0"]
    if "by name only" in running_shape:
        running = [row | {"record_id": NAMED} for row in running]
    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", "80", resource=INSTANCE, instance_type="p5.48xlarge",
                                     tags={"team": "platform"})])
    if running_shape.startswith("by name before the fix"):
        add_jobs(lake, [row | {"record_id": NAMED} for row in pod_rows(uid_on_requests=False, minutes=10)],
                 source="k8s", snapshot="2026-11-01")
    seen = datetime.fromtimestamp(T0 + 60 * 20, timezone.utc)
    add_jobs(lake, running, source="k8s", snapshot="2026-11-02", facts=window_fields(seen, 48))
    add_jobs(lake, done, source="k8s", snapshot="2026-11-03", facts=window_fields(seen + timedelta(minutes=65), 1))
    return lake, config({"clusters": {}}, lake)


# Charged 10:00-10:30 once, as the newest record shows it. Counted twice, 10:00-10:20 was
# over-booked 16 GPUs of 8 and w-0 got half its hours' shares ($26.67 to p5, $13.33 idle).
ONCE = {("train/w-0", "eks-p5"): Decimal(40), ("idle", "eks-p5"): Decimal(40)}


@pytest.mark.parametrize("running_shape", RENAMED)
def test_a_pod_running_across_a_rename_of_its_sources_cluster_is_charged_once(tmp_path, running_shape):
    lake, cfg = renamed_lake(tmp_path, running_shape)
    result = attribute(lake, cfg, HOUR, by=("run", "cluster"))
    assert {(r.values["run"], r.values["cluster"]): r.cost for r in result.rows if r.cost} == ONCE
    assert not result.overbooked
    assert all(r.ok for r in reconcile(lake, cfg))
    query = RunsQuery.parse(since="2026-11-02T10:00:00Z", until="2026-11-02T11:00:00Z")
    assert [(r.run, r.gpu_hours, r.cost) for r in runs(lake, cfg, query).rows] == [("train/w-0", 4, Decimal(40))]


def two_clusters_lake(tmp_path):
    """A source reading two clusters (cluster_label) may hold train/w-0 created in the same
    second in both, c1's read by uid, c2's by name (in one snapshot, then c1's alone: c2's
    ended before the newer window); each on its own instance. (lake, config)"""
    other = "i-0ddd3333eeee4444f"

    def read(cluster: str, instance: str, minutes: int, by_name: bool = False) -> dict:
        [row] = pod_rows(uid_on_requests=True, minutes=minutes, done_at=30, cluster=cluster)
        named = {"record_id": f"{cluster}/train/w-0@{T0:.0f}"} if by_name else {}
        return row | named | {"instance_ids": [instance]}

    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", "80", resource=instance, instance_type="p5.48xlarge",
                                     tags={"team": "platform"}) for instance in (INSTANCE, other)])
    add_jobs(lake, [read("c1", INSTANCE, 40), read("c2", other, 40, by_name=True)], source="k8s", snapshot="2026-11-02")
    add_jobs(lake, [read("c1", INSTANCE, 50)], source="k8s", snapshot="2026-11-03")
    return lake, config({"clusters": {}}, lake)


# Two pods, each $40 of its instance's $80: not one source's renamed cluster (c2's record
# taking c1's uid would leave c2's instance idle).
TWO = {("train/w-0", "c1"): Decimal(40), ("train/w-0", "c2"): Decimal(40), ("idle", "c1"): Decimal(40),
       ("idle", "c2"): Decimal(40)}


def test_two_pods_of_one_name_and_creation_in_two_clusters_of_one_source_stay_two(tmp_path):
    lake, cfg = two_clusters_lake(tmp_path)
    result = attribute(lake, cfg, HOUR, by=("run", "cluster"))
    assert {(r.values["run"], r.values["cluster"]): r.cost for r in result.rows if r.cost} == TWO


def test_read_by_name_without_creation_times_a_new_uid_on_kube_pod_info_is_a_new_pod():
    """ps-0 re-created within a scrape interval (never unlisted), no kube_pod_created nor start
    time: the uid kube_pod_info carries changes at 1300, so two pods, each its own record."""
    listed = [{"metric": {"namespace": "train", "pod": "ps-0", "uid": uid, "node": "n1"},
               "values": [(t, t) for t in times]}
              for uid, times in (("u-1", range(1000, 1300, 60)), ("u-2", range(1300, 1600, 60)))]
    table = PodTable(None, "p5")
    table.add_reported([{"metric": {}, "values": [(t, t) for t in range(1000, 1600, 60)]}])
    table.add_without_uid([{"metric": {}, "values": [(1540, 1.0)]}])
    table.add_lives(listed, [], [])
    table.add_requests([{"metric": {"namespace": "train", "pod": "ps-0", "resource": "nvidia_com_gpu"},
                         "values": [(t, 2.0) for t in range(1000, 1600, 60)]}])
    table.add_info(listed)
    assert sorted((r["record_id"], r["gpus"]) for r in table.rows(())) == [("p5/u-1", 2.0), ("p5/u-2", 2.0)]


def test_a_days_snapshot_taken_again_after_a_rename_of_the_cluster_keeps_the_pod_one_job(tmp_path):
    """Inventory run again the same day keeps the jobs only the earlier snapshot held
    (job_windows.kept_earlier); the source's `cluster` renamed p5 -> eks-p5 in between, w-0's
    earlier record p5/u-w0 is not one of them: its uid is in the later one (kept, it outranked
    eks-p5/u-w0 in the snapshot and ended the pod at 10:20 under p5)."""
    from connectors.jobs_base import jobs_relation
    from service.core.job_windows import kept_earlier
    from service.core.snapshot_ledger import read_record

    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", "80", resource=INSTANCE, instance_type="p5.48xlarge",
                                     tags={"team": "platform"})])
    seen = datetime.fromtimestamp(T0 + 60 * 20, timezone.utc)
    add_jobs(lake, pod_rows(uid_on_requests=True, minutes=20), source="k8s", snapshot="2026-11-02",
             facts=window_fields(seen, 1))
    earlier = lake.partition_file("jobs", [("source", "k8s"), ("snapshot_date", "2026-11-02")])
    con = lake.connect()
    try:
        done = jobs_relation(con, pod_rows(uid_on_requests=True, minutes=40, done_at=30, cluster="eks-p5"))
        kept = kept_earlier(con, done, str(earlier), read_record(lake.root, earlier),
                            window_fields(seen + timedelta(minutes=20), 1), seen + timedelta(minutes=20))
        relation, facts = kept.relation, kept.facts
        lake.commit_snapshot(con, relation, table="jobs", source="k8s", key="snapshot_date", value="2026-11-02",
                             facts=facts)
    finally:
        con.close()
    cfg = config({"clusters": {}}, lake)
    result = attribute(lake, cfg, HOUR, by=("run", "cluster"))
    assert {(r.values["run"], r.values["cluster"]): r.cost for r in result.rows if r.cost} == ONCE
    assert facts["window_start"] == window_fields(seen, 1)["window_start"]
