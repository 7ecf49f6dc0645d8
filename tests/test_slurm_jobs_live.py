"""slurm-jobs against the real one-node Slurm 22.05 cluster of tests/slurm_cluster.py: what
`sacct --json` and `sacct --parsable2 --format=<README's list>` write, and what slurmrestd
answers over HTTP with a JWT from the environment, become the same rows, and those rows are
the workload as submitted (states, GPUs, nodes, restarts, runs)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from slurm_cluster import CLUSTER, NODE, REST_VERSION, WORKLOAD, slurm_cluster  # noqa: F401 (fixture)

from connectors.slurm_records import SACCT_FORMAT
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

pytestmark = [pytest.mark.slow, pytest.mark.binary]
COLUMNS = "record_id, job_id, run_id, cluster, state, gpus, nodes, restarts, account, partition, name, start_time, end_time"


def snapshot(tmp_path: Path, name: str, **source) -> list[tuple]:
    lake = tmp_path / f"lake-{name}"
    config = parse_config({"lake": str(lake), "inventory": [{"name": "slurm", "kind": "slurm-jobs", **source}]})
    [outcome] = run_inventory(config, now=datetime.now(timezone.utc))
    assert outcome.error is None, outcome.error
    con = Lake(lake).query()
    try:
        return con.execute(f"SELECT {COLUMNS} FROM jobs ORDER BY record_id").fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def settled(slurm_cluster):  # noqa: F811
    """The cluster once every job of the workload has its final records."""
    slurm_cluster.settled(timeout=180)
    return slurm_cluster


def test_sacct_json_parsable2_and_slurmrestd_give_the_same_rows(tmp_path, settled, monkeypatch):
    (tmp_path / "sacct.json").write_text(settled.sacct("--json"))
    (tmp_path / "sacct.txt").write_text(settled.sacct("--parsable2", f"--format={SACCT_FORMAT}"))
    monkeypatch.setenv("SPENDLAKE_TEST_SLURM_JWT", settled.token(lifespan=600))
    from_json = snapshot(tmp_path, "json", path=str(tmp_path / "sacct.json"))
    assert snapshot(tmp_path, "text", path=str(tmp_path / "sacct.txt")) == from_json
    # slurmrestd: the version found in its OpenAPI document, the user from the token's claims
    assert snapshot(tmp_path, "rest", url=settled.rest, token_env="SPENDLAKE_TEST_SLURM_JWT",
                    lookback_hours=3) == from_json


def test_the_rows_are_the_workload_as_submitted(tmp_path, settled):
    (tmp_path / "sacct.json").write_text(settled.sacct("--json"))
    rows = snapshot(tmp_path, "json", path=str(tmp_path / "sacct.json"))
    by_job: dict[str, list[tuple]] = {}
    for row in rows:
        by_job.setdefault(row[1], []).append(row)
    for spec in WORKLOAD:
        job = settled.jobs[spec.key]
        ids = [f"{job.job_id}_{task}" for task in range(2)] if spec.key == "array" else [str(job.job_id)]
        records = [r for i in ids for r in sorted(by_job[i], key=lambda r: r[7])]
        assert tuple(r[4] for r in records) == spec.states, spec.key
        for restarts, (record_id, _, run, cluster, _, gpus, nodes, restarts_seen, account, partition, name,
                       start, end) in enumerate(records):
            assert (cluster, account, partition, name) == (CLUSTER, spec.account, spec.partition, spec.name)
            assert restarts_seen == (restarts if spec.key == "requeued" else 0)
            assert run == ({"completed": "llama-70b-r1", "failed": "sft-v2"}.get(spec.key) or str(job.job_id))
            assert start is not None and end is not None and start <= end
            if spec.key == "pending":  # never allocated
                assert (gpus, nodes) == (0, None)
            else:
                assert (gpus, nodes) == (spec.gpus, [NODE])
            assert record_id.startswith(f"{CLUSTER}/")


def test_a_refused_token_fails_the_source_with_slurmrestds_error(tmp_path, settled, monkeypatch):
    monkeypatch.setenv("SPENDLAKE_TEST_SLURM_JWT", "not-a-token")
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": settled.rest, "token_env": "SPENDLAKE_TEST_SLURM_JWT",
         "api_version": REST_VERSION, "user_name": "root"}]})
    [outcome] = run_inventory(config)
    assert "slurmrestd answered with error(s): Protocol authentication error" in str(outcome.error)
    assert "not-a-token" not in str(outcome.error) and not (tmp_path / "lake" / "jobs").exists()
    assert json.loads(settled.rest_jobs())["jobs"]  # with a good token it answers
