"""Two clusters' job sources whose node names overlap: a job named on a node reaches that node's
instance in its own cluster only; where the instances' cluster tags do not tell the clusters
apart, each source's jobs reach the other's instance of the same node name and over-book it,
and the over-booked warnings name the sources and the nodes (p5.48xlarge: 8 GPUs, $80 an hour)."""

from __future__ import annotations

import logging

import yaml
from click.testing import CliRunner

from service.attribution import attribute, materialise, reconcile
from service.cli.main import cli
from service.core.config import load_config
from service.core.lake import Lake
from tests.attribution_helpers import add_jobs, config, declared_sources, make_lake
from tests.test_clusters_allocation import NOVEMBER, D, by, gpu_line, job

# the instances' cluster tags spelled otherwise than the jobs' clusters: nothing tells the
# two gpu-001 apart, so a job reaches both
ELSEWHERE = ("us-west", "us-east")


def _config(tmp_path, jobs_by_source: dict[str, list[dict]], clusters: tuple[str | None, str | None] = ELSEWHERE):
    tags = [{"cluster": c} if c else {} for c in clusters]
    lake = make_lake(tmp_path, [gpu_line("i-w", node="gpu-001", **tags[0]),
                                gpu_line("i-e", node="gpu-001", **tags[1])])
    for source, rows in jobs_by_source.items():
        add_jobs(lake, rows, source=source)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(lake.root), "sources": declared_sources(lake),
        "inventory": [{"name": s, "kind": "jobs-file", "path": str(tmp_path / s)} for s in jobs_by_source],
        "attribution": {"clusters": {"node_tag": "node", "cluster_tag": "cluster"}}}))
    return path


def _run(path, *args):
    shown = CliRunner().invoke(cli, ["--config", str(path), *args, "--since", "2026-11-01", "--until", "2026-12-01",
                                     "--format", "json"])
    assert shown.exit_code == 0, shown.output
    return shown.stderr


def _both(tmp_path, clusters):
    # west's w1 holds gpu-001's 8 GPUs 10:00-11:00, east's e1 4 GPUs 10:00-10:30
    path = _config(tmp_path, {
        "west": [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west")],
        "east": [job("e1", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", nodes=["GPU-001"], cluster="east")]},
        clusters)
    config = load_config(path)
    return path, Lake.of(config), config.attribution


def test_a_job_placed_by_node_name_lands_only_on_its_own_clusters_instance(tmp_path):
    # i-w (cluster west) is w1's alone: $80 to w1. i-e (cluster east): e1 holds 4·30/(8·60) =
    # 1/4 of its hour, $20, the rest is east's idle, $60. Nothing over-booked, nothing named.
    # (Before: each job on both instances, 600 GPU-minutes of 480 on each: w1 $128, e1 $32.)
    path, lake, cfg = _both(tmp_path, ("west", "east"))
    assert by(lake, cfg, ["run", "cluster"]) == {("w1", "west"): D(80), ("e1", "east"): D(20),
                                                 ("idle", "east"): D(60)}
    assert all(r.ok for r in reconcile(lake, cfg))
    for command in (["attribute", "--by", "run"], ["runs"]):
        assert "over-booked" not in _run(path, *command)
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--check"])
    assert shown.exit_code == 0, shown.output


def test_an_instance_in_no_cluster_is_taken_before_one_in_another(tmp_path):
    # i-e carries no cluster tag: e1 (east) finds no gpu-001 of its cluster and takes the one in
    # no cluster, not west's; w1 keeps to i-w. As above: w1 $80; e1 $20 and i-e's idle $60
    # (its cluster: its jobs').
    _path, lake, cfg = _both(tmp_path, ("west", None))
    assert by(lake, cfg, ["run"]) == {"w1": D(80), "e1": D(20), "idle": D(60)}
    assert all(r.ok for r in reconcile(lake, cfg))


def test_cluster_tags_naming_neither_cluster_fall_back_to_every_instance_of_the_node(tmp_path):
    # us-west / us-east: each job reaches both gpu-001, as before the cluster was read: on each
    # instance 8·60 + 4·30 = 600 GPU-minutes of 480, shared in proportion: w1 2·$64, e1 2·$16
    _path, lake, cfg = _both(tmp_path, ELSEWHERE)
    assert by(lake, cfg, ["run"]) == {"w1": D(128), "e1": D(32)}
    assert all(r.ok for r in reconcile(lake, cfg))


def test_the_over_booked_warning_names_the_two_sources_and_their_shared_node(tmp_path):
    # west's job holds gpu-001's 8 GPUs 10:00-11:00, and so does east's: with cluster tags
    # naming neither, each reaches both instances named gpu-001, so both hours hold 16 GPUs of 8
    path = _config(tmp_path, {
        "west": [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west")],
        "east": [job("e1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["GPU-001"], cluster="east")]})
    for command in (["attribute", "--by", "run"], ["runs"]):
        said = _run(path, *command)
        assert "2 instance-hour(s) in the window were over-booked" in said
        assert ("the job sources east and west both name node(s) gpu-001 over the same hours, in clusters east and "
                "west: a job reaches the instances of its node whose cluster tag") in said


def test_two_sources_of_one_cluster_naming_a_node_alike_are_named_as_such(tmp_path):
    # west read twice (files and slurmrestd, both kept): w1 and w2 each hold west's gpu-001 (i-w)
    # for the hour, 16 GPUs of 8; east's instance is not theirs
    path = _config(tmp_path, {
        "west": [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west")],
        "west-rest": [job("w2", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"],
                          cluster="West")]}, ("west", "east"))
    said = _run(path, "attribute", "--by", "run")
    assert "1 instance-hour(s) in the window were over-booked" in said
    assert ("the job sources west and west-rest both name node(s) gpu-001 over the same hours in the same cluster "
            "(west): their jobs are placed on the same instances") in said


def test_sources_using_a_node_name_at_different_times_are_not_named(tmp_path):
    # west then east on gpu-001 (a cluster read from files, then from slurmrestd): nothing
    # meets; an over-booked hour of one source alone says nothing about sources
    path = _config(tmp_path, {
        "west": [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west"),
                 job("w2", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west")],
        "east": [job("e1", 8, "2026-11-03T10:00:00", "2026-11-03T11:00:00", nodes=["gpu-001"], cluster="east")]})
    said = _run(path, "attribute", "--by", "run")
    assert "over-booked" in said
    assert "job sources" not in said


def test_the_rollup_build_names_them_too(tmp_path, caplog):
    path = _config(tmp_path, {
        "west": [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west")],
        "east": [job("e1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="east")]})
    config = load_config(path)
    with caplog.at_level(logging.WARNING):
        assert materialise(Lake.of(config), config.attribution).built == 1
    said = [r.getMessage() for r in caplog.records if "job sources" in r.getMessage()]
    assert len(said) == 1 and "the job sources east and west both name node(s) gpu-001 over the same hours" in said[0]


def test_a_job_never_lands_on_another_known_clusters_instance_when_its_own_is_not_billed(tmp_path):
    # west is on-premises (or its account's bill is not in yet): only east's gpu-001 (i-e,
    # cluster tag east) is billed. w1 (west) names gpu-001 too but i-e is east's, a cluster jobs
    # name: w1 reaches no instance and costs nothing here; i-e: e1 holds 4·30/(8·60) = 1/4 of its
    # hour, $20, east's idle $60. (Before: w1 took i-e as "all of that name", 600 GPU-minutes of
    # 480, w1 $64 of east's bill and e1 $16.)
    lake = make_lake(tmp_path, [gpu_line("i-e", node="gpu-001", cluster="east")])
    add_jobs(lake, [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west"),
                    job("e1", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", nodes=["gpu-001"], cluster="East ")])
    cfg = config({"clusters": {"node_tag": "node", "cluster_tag": "cluster"}}, lake).attribution
    assert by(lake, cfg, ["run", "cluster"]) == {("e1", "East"): D(20), ("idle", "East"): D(60)}
    assert all(r.ok for r in reconcile(lake, cfg))


def test_an_instance_whose_cluster_tag_names_no_jobs_cluster_is_still_reached(tmp_path):
    # i-e's tag says us-east, which no job's cluster spells: nothing tells it is not west's,
    # so w1 still reaches it (all of that name, as before): 8 GPUs for the hour, $80
    lake = make_lake(tmp_path, [gpu_line("i-e", node="gpu-001", cluster="us-east")])
    add_jobs(lake, [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west")])
    cfg = config({"clusters": {"node_tag": "node", "cluster_tag": "cluster"}}, lake).attribution
    assert by(lake, cfg, ["run"]) == {"w1": D(80)}


def test_a_node_whose_instance_was_replaced_places_each_job_on_the_instance_of_its_hours(tmp_path):
    # gpu-001 was i-old (launched before the cluster tag was set: none) 10:00-11:00, then i-new
    # (cluster west) 12:00-13:00; w1 held its 8 GPUs 10:00-11:00, w2 12:00-13:00: each its
    # instance's $80. (Before: w1's node went to the best ranked instance of the name over the
    # window, i-new, which has no line in w1's hour: w1 $0 and i-old's $80 idle.)
    lake = make_lake(tmp_path, [gpu_line("i-old", node="gpu-001"),
                                gpu_line("i-new", start="2026-11-02T12:00:00", node="gpu-001", cluster="west")])
    add_jobs(lake, [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west"),
                    job("w2", 8, "2026-11-02T12:00:00", "2026-11-02T13:00:00", nodes=["gpu-001"], cluster="west")])
    cfg = config({"clusters": {"node_tag": "node", "cluster_tag": "cluster"}}, lake).attribution
    assert by(lake, cfg, ["run"]) == {"w1": D(80), "w2": D(80)}
    assert all(r.ok for r in reconcile(lake, cfg))


def test_a_job_running_while_its_node_was_replaced_is_on_each_instance_for_that_instances_hours(tmp_path):
    # gpu-001 was i-old (no cluster tag) 00:00-06:30, $80 an hour ($520), then i-new (cluster
    # west) from 06:00 to 12:00 ($480); w1 held its 8 GPUs 02:00-10:00. Where both are billed
    # (06:00-06:30) w1 is on its own cluster's i-new: on i-old 02:00-06:00, $320, on i-new
    # 06:00-10:00, $320; west's idle is i-old's 00:00-02:00 and 06:00-06:30 ($200) and i-new's
    # 10:00-12:00 ($160). (Before: w1 on i-new alone, $320; i-old's $520 unallocated.)
    lake = make_lake(tmp_path, [
        gpu_line("i-old", "520", "2026-11-02T00:00:00", "2026-11-02T06:30:00", node="gpu-001"),
        gpu_line("i-new", "480", "2026-11-02T06:00:00", "2026-11-02T12:00:00", node="gpu-001", cluster="west")])
    add_jobs(lake, [job("w1", 8, "2026-11-02T02:00:00", "2026-11-02T10:00:00", nodes=["gpu-001"], cluster="west")])
    cfg = config({"clusters": {"node_tag": "node", "cluster_tag": "cluster"}}, lake).attribution
    assert by(lake, cfg, ["run", "cluster"]) == {("w1", "west"): D(640), ("idle", "west"): D(360)}
    assert all(r.ok for r in reconcile(lake, cfg))


def test_a_job_its_own_clusters_instance_interrupts_for_part_of_an_hour_is_one_weight_of_that_hour(tmp_path):
    # gpu-001 is i-any (no cluster tag) 00:00-02:00 and, 01:10-01:30, also west's i-west ($20):
    # w1 (west, 8 GPUs 00:00-02:00) is on i-west then, on i-any 00:00-01:10 and 01:30-02:00.
    # i-any's 01:00 hour: w1 8·(10 + 30) = 320 GPU-minutes, w2 3·60 = 180, of 480: over-booked,
    # one slot, shared in proportion: w1 $80·320/500 = $51.20, w2 $28.80; w1 $80 + $51.20 + $20
    lake = make_lake(tmp_path, [
        gpu_line("i-any", "160", "2026-11-02T00:00:00", "2026-11-02T02:00:00", node="gpu-001"),
        gpu_line("i-west", "20", "2026-11-02T01:10:00", "2026-11-02T01:30:00", node="gpu-001", cluster="west")])
    add_jobs(lake, [job("w1", 8, "2026-11-02T00:00:00", "2026-11-02T02:00:00", nodes=["gpu-001"], cluster="west"),
                    job("w2", 3, "2026-11-02T01:00:00", "2026-11-02T02:00:00", instance_ids=["i-any"], cluster="west")])
    cfg = config({"clusters": {"node_tag": "node", "cluster_tag": "cluster"}}, lake).attribution
    assert by(lake, cfg, ["run"]) == {"w1": D("151.2"), "w2": D("28.8")}
    assert attribute(lake, cfg, NOVEMBER, by=("run",)).overbooked == 1
    assert all(r.ok for r in reconcile(lake, cfg))


def test_a_nodes_instance_billed_while_none_of_its_jobs_ran_stays_the_clusters_idle(tmp_path):
    # i-a (gpu-001, no cluster tag) is billed 10:00-11:00, its node's only job w1 runs 12:00-13:00
    # on no billed instance: i-a is still the cluster's (a job names its node), its $80 idle;
    # i-b (gpu-002, no job names it) billed 12:00-13:00 is no cluster's, its $80 unallocated
    lake = make_lake(tmp_path, [gpu_line("i-a", node="gpu-001"),
                                gpu_line("i-b", start="2026-11-02T12:00:00", node="gpu-002")])
    add_jobs(lake, [job("w1", 8, "2026-11-02T12:00:00", "2026-11-02T13:00:00", nodes=["gpu-001"], cluster="west")])
    cfg = config({"clusters": {"node_tag": "node", "cluster_tag": "cluster"}}, lake).attribution
    assert by(lake, cfg, ["run", "cluster"]) == {("idle", "west"): D(80), ("unallocated", "unallocated"): D(80)}
    assert all(r.ok for r in reconcile(lake, cfg))
