"""Two clusters' job sources whose node names overlap: each source's jobs reach the other's
instance of the same node name and over-book it; the over-booked warnings name the sources
and the nodes (p5.48xlarge: 8 GPUs, $80 an hour)."""

from __future__ import annotations

import logging

import yaml
from click.testing import CliRunner

from service.attribution import materialise
from service.cli.main import cli
from service.core.config import load_config
from service.core.lake import Lake
from tests.attribution_helpers import add_jobs, declared_sources, make_lake
from tests.test_clusters_allocation import gpu_line, job


def _config(tmp_path, jobs_by_source: dict[str, list[dict]]):
    lake = make_lake(tmp_path, [gpu_line("i-w", node="gpu-001", cluster="west"),
                                gpu_line("i-e", node="gpu-001", cluster="east")])
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


def test_the_over_booked_warning_names_the_two_sources_and_their_shared_node(tmp_path):
    # west's job holds gpu-001's 8 GPUs 10:00-11:00, and so does east's: each reaches both
    # instances named gpu-001, so both hours hold 16 GPUs of 8
    path = _config(tmp_path, {
        "west": [job("w1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["gpu-001"], cluster="west")],
        "east": [job("e1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["GPU-001"], cluster="east")]})
    for command in (["attribute", "--by", "run"], ["runs"]):
        said = _run(path, *command)
        assert "2 instance-hour(s) in the window were over-booked" in said
        assert "the job sources east and west both name node(s) gpu-001 over the same hours" in said


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
