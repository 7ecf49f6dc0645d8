"""How a job's part names its placement: `job:<job id>`, then the record of its attempt after
RECORD_MARK (a Slurm requeue keeps the job id, each attempt is a record of its own), so
`--explain` tells two attempts of one job apart (its `record`, beside `job:<id>`). What names
the placement (the answers, an export) or the job (runs) takes what precedes the mark.
"""

from __future__ import annotations

RECORD_MARK = "\x1f"  # no job id or record holds it (a control character)


def job_how(how: str) -> tuple[str, str | None]:
    """A placement as --explain names it (`job:7`) and the job record a job's part carries after
    RECORD_MARK (None: none, as for a pod's part, an idle part or a tag)."""
    shown, _, record = how.partition(RECORD_MARK)
    return shown, record or None


def shown_how_sql(how: str) -> str:
    """SQL: the placement `how` (a `how` column) as --explain names it, its record left out."""
    return f"split_part({how}, chr({ord(RECORD_MARK)}), 1)"


def job_id_sql(how: str) -> str:
    """SQL: the job id of a job part's placement `how` (`job:7` and its record: `7`)."""
    return f"substr({shown_how_sql(how)}, strpos({how}, ':') + 1)"
