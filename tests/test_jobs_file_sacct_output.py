"""Slurm's own files under a jobs-file source (sacct --json, sacct --parsable2 saved as .csv or
left as .txt) fail naming what they are and kind slurm-jobs, which reads them as written,
never asking to map a column named 'JobID|JobIDRaw|...' to job_id."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from tests.test_jobs_file import cli_inventory

SLURM = Path(__file__).parent / "data" / "slurm"


@pytest.mark.parametrize("sample, saved_as, says", [
    ("sacct.json", "sacct.json", "sacct.json is sacct --json output, not a job table: kind slurm-jobs reads it"),
    ("sacct.json", "sacct.json.gz", "sacct.json.gz is sacct --json output, not a job table: kind slurm-jobs reads it"),
    ("sacct-parsable2.txt", "sacct.txt", "sacct.txt is sacct --parsable2 output, not a job table: kind slurm-jobs "
                                         "reads it"),
    ("sacct-parsable2.txt", "sacct.csv", "is sacct --parsable2 output, not a job table: kind slurm-jobs reads it"),
])
def test_sacct_output_under_a_jobs_file_source_names_kind_slurm_jobs(tmp_path, sample, saved_as, says):
    folder = tmp_path / "jobs"
    folder.mkdir()
    if saved_as.endswith(".gz"):
        (folder / saved_as).write_bytes(gzip.compress((SLURM / sample).read_bytes()))
    else:
        shutil.copy(SLURM / sample, folder / saved_as)
    result = cli_inventory(tmp_path, folder)
    assert result.exit_code == 3, result.output
    assert says in result.output and "set the source's kind to slurm-jobs" in result.output
    assert "map the file's own names" not in result.output and "Philly" not in result.output


def test_a_job_table_separated_by_pipes_is_still_a_job_table_and_json_not_from_slurm_still_names_philly(tmp_path):
    (tmp_path / "jobs.csv").write_text("job_id|start_time|end_time|gpus\n1|2026-11-30T10:00:00Z||8\n")
    result = cli_inventory(tmp_path, tmp_path / "jobs.csv")
    assert result.exit_code == 3 and "slurm-jobs" not in result.output, result.output
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "log.json").write_text('[{"jobid": "a", "attempts": []}]')
    result = cli_inventory(tmp_path, tmp_path / "logs")
    assert result.exit_code == 3 and "Philly" in result.output and "slurm-jobs" not in result.output, result.output
