"""slurm-jobs on what other Slurm versions write: the v0.0.39+ data parser's state list (the
base state and its flags, as the REST API and sacct --json of Slurm 23.02+ return it; sacct's
text prints the flag instead: doc/html/job_state_codes.shtml, job_state_string), and a
--parsable2 file written with --noheader."""

from __future__ import annotations

import json

import pytest

from connectors.slurm_json import json_attempts, sacct_state
from connectors.slurm_records import rows_of
from tests.test_slurm_jobs import SLURM, cli_inventory, newer_shape


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
