"""What `spendlake serve` says of itself speaks of the service, not of a command run by hand
(break53 finding 11): its report folder is report.out and it tries the report again by itself."""

from __future__ import annotations

from datetime import date

import pytest
from servicekit import commit, make_config

from service.core.errors import ResourceError
from service.core.lake import Lake
from service.serve.daily import write_daily_report

ROWS = [("2026-11-28 03:00:00", "2026-11-28 04:00:00", "USD", "2", {}),
        ("2026-11-29 23:00:00", "2026-11-30 00:30:00", "USD", "5", {})]


def test_the_daily_report_on_a_full_disk_names_report_out_and_says_the_service_tries_again(tmp_path, monkeypatch):
    """Was '— free space on the --out folder's file system ..., then run the command again': serve has no
    --out, and tries the report again by itself."""
    from service.core import publish

    config = make_config(tmp_path)
    commit(Lake.of(config), "cur", ROWS)
    monkeypatch.setattr(publish, "open", lambda path, mode: open("/dev/full", mode), raising=False)
    with pytest.raises(ResourceError) as refused:
        write_daily_report(config, date(2026, 11, 29))
    assert refused.value.hint == ("free space on the report.out folder's file system (or choose another folder), the "
                                  "service writes the report again by itself (after 5 minutes, doubling up to "
                                  "hourly); what the folder held before is intact")
