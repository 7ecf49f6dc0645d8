"""slurm-jobs on what other Slurm versions write: the v0.0.39+ data parser's state list (the
base state and its flags, as the REST API and sacct --json of Slurm 23.02+ return it; sacct's
text prints the flag instead: doc/html/job_state_codes.shtml, job_state_string), and a
--parsable2 file written with --noheader."""

from __future__ import annotations

import json

import pytest

from connectors.slurm_json import json_attempts, sacct_state
from connectors.slurm_records import rows_of
from service.core.errors import ConfigError
from tests.test_slurm_jobs import SLURM, cli_inventory, jobs, newer_shape, run


@pytest.mark.parametrize("current, state", [
    (["PENDING", "REQUEUED"], "REQUEUED"),  # an attempt requeued after it ran: JOB_REQUEUE has base state PENDING
    (["COMPLETED"], "COMPLETED"), (["RUNNING", "CONFIGURING"], "CONFIGURING"),
    (["CANCELLED", "COMPLETING"], "COMPLETING"), (["PENDING", "REQUEUE_HOLD"], "REQUEUE_HOLD"),
    (["FAILED", "UPDATE_DB"], "FAILED"), (["PENDING", "LAUNCH_FAILED"], "PENDING"),  # flags sacct never prints
    ("CANCELLED by 0", "CANCELLED"), (["SLEEPING"], None), ([], None), (None, None)])
def test_a_state_list_reads_as_sacct_prints_it(current, state):
    assert sacct_state(current) == state


def test_a_requeued_attempt_in_the_v0_0_40_shape_is_requeued_not_pending():
    """Read as the list's first element, the requeued attempt of job 5, which ran and held its
    GPU, was PENDING: the report's failed-and-restarted cost lost it."""
    data = json.loads((SLURM / "sacct.json").read_text())
    newer = {"jobs": [newer_shape(record) for record in data["jobs"]]}
    for record in newer["jobs"]:
        if record["state"]["current"] == ["REQUEUED"]:
            record["state"]["current"] = ["PENDING", "REQUEUED"]
    older = rows_of(json_attempts(data, None), ())
    assert [row["state"] for row in older].count("REQUEUED") == 1
    assert rows_of(json_attempts(newer, None), ()) == older


def test_a_parsable2_file_written_with_noheader_says_so(tmp_path):
    lines = (SLURM / "sacct-parsable2.txt").read_text().splitlines(True)
    (tmp_path / "sacct.txt").write_text("".join(lines[1:]))
    result = cli_inventory(tmp_path, tmp_path / "sacct.txt")
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert "sacct.txt: line 1: a job's record (1), not the header line naming the columns (written with --noheader?)" \
        in result.output
    assert "run sacct without --noheader: --parsable2 --format=JobID,JobIDRaw," in result.output


def sharded(folder, name: str):
    """The live capture `name` with job 2 (2 GPUs) allocated 2 GPU shards instead, as Slurm
    records a `--gres=shard:2` job under AccountingStorageTRES=gres/gpu,gres/shard (gres.html,
    Sharding): `gres/shard=2` in AllocTRES, a {"type": "gres", "name": "shard"} TRES in JSON."""
    path = folder / name
    if name.endswith(".json"):
        data = json.loads((SLURM / name).read_text())
        for record in data["jobs"]:
            for entry in record["tres"]["allocated"] if record["job_id"] == 2 else ():
                entry["name"] = "shard" if entry["name"] == "gpu" else entry["name"]
        path.write_text(json.dumps(data))
    else:
        lines = (SLURM / name).read_text().splitlines(True)
        path.write_text("".join(line.replace("gres/gpu=2", "gres/shard=2") if line.startswith(("2|", "2.")) else line
                                for line in lines))
    return path


@pytest.mark.parametrize("name", ["sacct.json", "sacct-parsable2.txt"])
def test_gpus_shared_as_shards_count_as_the_share_configured(tmp_path, monkeypatch, name):
    """A job on GPU shards held 0 GPUs (only gres/gpu was read): its hours went to idle, and no
    warning said so while other jobs held GPUs. With shared_gpus {shard: 4} (gres.conf: 4 shards
    per GPU) its 2 shards are half a GPU; without it, still none. The line reader agrees."""
    import connectors.sacct_columns as sacct_columns

    path = sharded(tmp_path, name)
    gpus = {}
    for shared in ({}, {"shard": 4}):
        assert run(tmp_path / str(len(shared)), path=str(path), shared_gpus=shared).error is None
        gpus[len(shared)] = dict(jobs(tmp_path / str(len(shared)), "job_id, gpus"))
    assert gpus[0]["2"] == 0 and gpus[1]["2"] == 0.5
    assert {job: n for job, n in gpus[1].items() if job != "2"} == {job: n for job, n in gpus[0].items() if job != "2"}
    assert gpus[1]["1"] == 1 and gpus[1]["4"] == 2  # the whole GPUs as before
    monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)  # the line reader
    assert run(tmp_path / "lines", path=str(path), shared_gpus={"shard": 4}).error is None
    assert dict(jobs(tmp_path / "lines", "job_id, gpus")) == gpus[1]


@pytest.mark.parametrize("name, lines", [("sacct.json", False), ("sacct-parsable2.txt", False),
                                         ("sacct-parsable2.txt", True)])
def test_gpu_shards_no_shared_gpus_counts_are_said_once_per_source(tmp_path, monkeypatch, caplog, name, lines):
    """Without shared_gpus, job 2's 2 shards counted 0 GPUs with no word (other jobs held GPUs,
    so the no-gres/gpu warning stays silent): its hours went to idle. One line per source, not
    per file (the same file twice under the source's folder), names the GRES, the job and the key."""
    import connectors.sacct_columns as sacct_columns

    if lines:
        monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    folder = tmp_path / "files"
    folder.mkdir()
    sharded(folder, name).with_name(f"b-{name}").write_bytes(sharded(folder, name).read_bytes())
    assert run(tmp_path / "bare", path=str(folder)).error is None
    said = [r.getMessage() for r in caplog.records if "gres/shard" in r.getMessage()]
    assert said == [f"{folder}: 1 record(s) hold gres/shard, which shares GPUs, and count 0 GPUs for it (their hours "
                    "go to idle); the first, job 2: set inventory[0].shared_gpus: {shard: <its count per GPU in "
                    "gres.conf>}"], said
    caplog.clear()
    assert run(tmp_path / "shared", path=str(folder), shared_gpus={"shard": 4}).error is None
    assert "shares GPUs" not in caplog.text


@pytest.mark.parametrize("shared, says", [
    ({"gpu": 2}, "shared_gpus: 'gpu' is not a GRES sharing GPUs as AllocTRES names it (gres/<name>), such as shard or "
                 "mps: gpu is read as whole GPUs"),
    ({"shard": 0}, "shared_gpus.shard: must be at least 1, not 0"),
    ({"gres/shard": 4}, "shared_gpus: 'gres/shard' is not a GRES sharing GPUs as AllocTRES names it")])
def test_shared_gpus_names_a_gres_and_its_count_per_gpu(tmp_path, shared, says):
    with pytest.raises(ConfigError) as error:
        run(tmp_path, path=str(SLURM / "sacct.json"), shared_gpus=shared)
    assert f"inventory[0].{says}" in str(error.value), error.value
