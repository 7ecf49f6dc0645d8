"""A write the machine refuses is told by its cause and what to free or raise, where
(RELIABILITY 11, 53): a full disk, a used-up quota (EDQUOT), a file past the process's size
limit or the file system's largest (EFBIG, `ulimit -f`), from the OS or from DuckDB."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

from conftest import REPO
from service.core.errors import ResourceError, duckdb_error, os_error


def duckdb_text(number: int, words: str) -> str:
    return ('IO Error: Async write failed for range [offset=29, size=1830101]: {"exception_type":"IO",'
            f'"exception_message":"Could not write file \\"/lake/_staging/x.parquet\\": {words}","errno":"{number}"}}')


@pytest.mark.parametrize("number, words, called, hint", [
    (errno.ENOSPC, "No space left on device", "disk full", "free disk space on the lake's file system"),
    (errno.EDQUOT, "Disk quota exceeded", "disk quota exceeded", "free space within this user's quota"),
    (errno.EFBIG, "File too large", "file too large", "raise the limit (`ulimit -f unlimited`"),
])
def test_11_53_a_refused_write_names_its_cause_and_what_to_free_or_raise(number, words, called, hint):
    for error in (os_error(OSError(number, words, "/lake/_staging/x.parquet")),
                  duckdb_error(Exception(duckdb_text(number, words)), "could not read the delivery", where="x.csv")):
        assert isinstance(error, ResourceError) and error.exit_code == 3
        assert error.message.startswith(f"{called}: "), error
        assert hint in str(error) and "_staging" in str(error) and "the previous data is intact" in str(error)
        assert "check the path" not in str(error) and "re-export" not in str(error)
    # DuckDB's sentence without its offsets and JSON (the message was 600 characters of them)
    said = duckdb_error(Exception(duckdb_text(number, words)), "could not write", where="/lake/_staging/x.parquet")
    assert said.message == f'{called}: Could not write file "/lake/_staging/x.parquet": {words}'


def test_11_duckdb_writing_past_rlimit_fsize_is_told_as_file_too_large(tmp_path):
    """The real error: DuckDB writing past RLIMIT_FSIZE (Python ignores SIGXFSZ: the write gets EFBIG)."""
    script = (
        "import resource, duckdb, sys\n"
        "from service.core.errors import duckdb_error\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))\n"
        "try:\n"
        "    duckdb.connect().sql('SELECT random()::VARCHAR AS v FROM range(100000)').write_parquet(sys.argv[1])\n"
        "except duckdb.Error as exc:\n"
        "    print(duckdb_error(exc, 'could not write', where=sys.argv[1]))\n")
    target = tmp_path / "big.parquet"
    done = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{target}: file too large: ") and "ulimit -f" in done.stdout, done.stdout
