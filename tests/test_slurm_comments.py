"""A Slurm Comment's labels (connectors/slurm_records.py `comment_labels`): its key=value words
are kept beside free text, and a comment that looks meant as labels yet yields none is said
once per file, not once per job (connectors/slurm_warnings.py `said_unread_comments`)."""

from __future__ import annotations

from datetime import datetime

import pytest

from connectors.slurm_records import comment_labels
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

HEADER = "JobID|JobIDRaw|State|Submit|Start|End|NodeList|AllocTRES|Comment"


def line(job: int, comment: str) -> str:
    return f"{job}|{job}|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:00|2026-12-01T11:00:00|p5-001|gres/gpu=8|{comment}"


@pytest.mark.parametrize("comment, labels", [
    ("run=r9 resumed after OOM", {"run": "r9"}),  # free text beside the label (break48 j2)
    ('run=r9 "', {"run": "r9"}), ('run="r9', {"run": "r9"}),  # a stray quote
    ("restarted: team=nlp, see ticket 12", {"team": "nlp"}),
    ("see http://wiki/x?run=5", {}),  # an `=` inside a word is not a label
    ('{"run":"r1",}', {}), ("rc = 0", {})])
def test_the_pairs_beside_free_text_are_kept(comment, labels):
    assert comment_labels(comment) == labels


def test_comments_meant_as_labels_that_yield_none_are_said_once_per_file(tmp_path, caplog):
    folder = tmp_path / "sacct"
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join([HEADER, line(500, "run=r9 resumed after OOM"), line(501, '{"run":"r1",}'),
                                             line(502, "plain words"), line(503, "rc = 0"),
                                             line(504, '{"run":"r1",}')]) + "\n")
    (folder / "b.txt").write_text("\n".join([HEADER, line(600, "run=r7")]) + "\n")
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "slurm", "kind": "slurm-jobs", "path": str(folder)}]})
    with caplog.at_level("WARNING"):
        [outcome] = run_inventory(config, now=datetime(2026, 12, 2))
    assert outcome.error is None
    assert [r.getMessage() for r in caplog.records] == [
        f"{folder / 'a.txt'}: 3 record(s) have a Comment that looks like labels but yields none (JSON that does not "
        "parse, or no key=value word), so their run is their job's; the first, job 501: '{\"run\":\"r1\",}'"]
    con = Lake(tmp_path / "lake").query()
    try:
        runs = con.execute("SELECT job_id, run_id FROM jobs ORDER BY job_id").fetchall()
    finally:
        con.close()
    assert runs == [("500", "r9"), ("501", "501"), ("502", "502"), ("503", "503"), ("504", "504"), ("600", "r7")]
