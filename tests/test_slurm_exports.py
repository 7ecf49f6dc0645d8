"""slurm-jobs on sacct exports as big clusters and other Slurm versions write them (session 33's
outsider pass; where each shape comes from is said at its test)."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timedelta

import duckdb
import pytest

import connectors.slurm_records as slurm_records
from connectors.slurm_json import json_attempts
from connectors.slurm_records import rows_of
from tests.inventory_support import traced_peak
from tests.test_sacct_json_stream import p5_attempts
from tests.test_slurm_jobs import SLURM, jobs, run

HEADER = "JobID|JobIDRaw|State|Submit|Start|End|NodeList|AllocTRES|JobName"


def allocation(number: int, name: str = "train") -> str:
    return (f"{number}|{number}|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T11:00:05|p5-001|"
            f"billing=96,cpu=96,gres/gpu=8,node=1|{name}\n")


def test_a_file_read_line_by_line_holds_a_batch_of_records_not_all_of_them(tmp_path, monkeypatch):
    """What the column-wise reader cannot take (a '|' in a job name, a bare CR, and until
    session 33 a byte that is not UTF-8) sends a file to the line reader, which held every record
    as a Python object until the last line: 1.43 GB for 1M jobs (bench's file, one Latin-1 `café`
    in it), over the 1 GB a million-line export may take."""
    def written(name: str, jobs: int):
        path = tmp_path / name
        path.write_bytes((HEADER + "\n").encode() + allocation(1, "caf").encode()[:-1] + b"\xe9\n"
                         + "".join(allocation(n) for n in range(2, jobs + 1)).encode())
        return path

    import connectors.sacct_columns as sacct_columns

    monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)  # its 16 MB block read aside
    monkeypatch.setattr(slurm_records, "BATCH_ROWS", 1_000)
    path = written("sacct.txt", 12_001)
    with duckdb.connect() as con:
        p5_attempts(con, written("small.txt", 2))  # the imports
        table, peak = traced_peak(lambda: p5_attempts(con, path))
        assert con.sql(f"SELECT count(*), count(DISTINCT _row), sum(gpus) FROM {table}").fetchall() == [
            (12_001, 12_001, 96_008.0)]
        assert con.sql(f"SELECT name FROM {table} WHERE _row = 0").fetchall() == [("caf\ufffd",)]
    assert peak < 3 << 20, f"{peak / 2**20:.1f} MB of Python objects at once"


@pytest.mark.parametrize("name, zone, line_reader", [
    ("sacct-formats-parsable.txt", "UTC", False),  # sacct -p: every line ends with a '|'
    ("sacct-formats-time-format-s.txt", "UTC", False),  # SLURM_TIME_FORMAT=%s: seconds since 1970
    ("sacct-formats-time-format-s.txt", "America/New_York", False),  # ... the same instant in any zone
    ("sacct-formats-time-format-s.txt", "America/New_York", True),
    ("sacct-formats.json", "UTC", False)])
def test_one_moment_of_the_cluster_in_every_form_sacct_writes_gives_the_same_rows(tmp_path, monkeypatch, name, zone,
                                                                                 line_reader):
    """Slurm 22.05.8 (tests/data/slurm/README.md): SLURM_TIME_FORMAT=%s failed the source
    ("Start '1796402998' is not a time")."""
    import connectors.sacct_columns as sacct_columns

    assert run(tmp_path / "lake-parsable2", path=str(SLURM / "sacct-formats-parsable2.txt")).error is None
    expected = jobs(tmp_path / "lake-parsable2", "* EXCLUDE (snapshot_date)")
    assert len(expected) == 17 and {row[5] for row in expected} >= {"RUNNING", "PENDING", "REQUEUED", "CANCELLED"}
    if line_reader:
        monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    assert run(tmp_path, path=str(SLURM / name), timezone=zone).error is None
    assert jobs(tmp_path, "* EXCLUDE (snapshot_date)") == expected


@pytest.mark.parametrize("line_reader", [False, True])
def test_exports_appended_to_one_file_each_with_its_header_are_read(tmp_path, monkeypatch, line_reader):
    """`sacct ... >> month.txt` every day: the second day's header line was read as a job
    ("line 22 (job JobID): State 'State' is not a Slurm job state") and failed the source."""
    import connectors.sacct_columns as sacct_columns

    whole = (SLURM / "sacct-formats-parsable2.txt").read_text()
    assert run(tmp_path / "one", path=str(SLURM / "sacct-formats-parsable2.txt")).error is None
    (tmp_path / "month.txt").write_text("".join(whole.splitlines(True)[:21]) + whole)  # day one's window ended earlier
    if line_reader:
        monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    assert run(tmp_path, path=str(tmp_path / "month.txt")).error is None
    assert jobs(tmp_path, "* EXCLUDE (snapshot_date)") == jobs(tmp_path / "one", "* EXCLUDE (snapshot_date)")


def test_an_appended_export_with_other_columns_fails_naming_its_header_line(tmp_path):
    whole = (SLURM / "sacct-formats-parsable2.txt").read_text()
    other = (SLURM / "sacct-parsable2.txt").read_text()  # the --format list of tests/slurm_cluster.py
    (tmp_path / "month.txt").write_text(whole + other)
    error = str(run(tmp_path, path=str(tmp_path / "month.txt")).error)
    assert "line 47: a header line naming other columns than the first: appended exports must share one --format " \
           "list" in error, error


def no_val(number):
    """UINT32_NO_VAL as data_parser v0.0.39+ dumps it: {set, infinite, number}."""
    return {"set": number is not None, "infinite": False, "number": number or 0}


def v0_0_41(record: dict, restarts: int = 0) -> dict:
    """A 22.05 (openapi/dbv0.0.38) record in the shape of data_parser v0.0.41/v0.0.42 (Slurm
    24.05/24.11; src/plugins/data_parser/v0.0.4x/parsers.c, PARSER_ARRAY(JOB)): times stay plain
    integers (TIMESTAMP), the task id, component offset, limit and priority become
    {set, infinite, number} (UINT32_NO_VAL), the state a list of the base state and its flags, the
    exit code an object, and v0.0.42 adds restart_cnt."""
    record = json.loads(json.dumps(record))
    state = record["state"]["current"]
    record["state"]["current"] = ["PENDING", "REQUEUED"] if state == "REQUEUED" else [state]
    record["array"]["task_id"] = no_val(record["array"]["task_id"])
    record["het"]["job_offset"] = no_val(record["het"]["job_offset"])
    record["time"]["limit"] = no_val(record["time"]["limit"])
    record["time"]["planned"] = no_val(None)
    record["priority"] = no_val(record["priority"])
    code = record["exit_code"]
    record["exit_code"] = {"status": [code["status"]], "return_code": no_val(code.get("return_code")),
                           "signal": {"id": no_val(None), "name": ""}}
    record["restart_cnt"] = restarts
    return record


@pytest.mark.parametrize("name", ["sacct-formats.json", "sacct-pending-het-array.json"])
def test_sacct_json_of_data_parser_v0_0_41_and_v0_0_42_gives_the_rows_of_22_05(name):
    """Every record of the live 22.05 captures (arrays, a requeued task, pending heterogeneous
    jobs, a pending array `5_[0-5%1]`, running and pending jobs) in the newer shape: the same rows."""
    data = json.loads((SLURM / name).read_text())
    newer = {"meta": {"plugin": {"data_parser": "data_parser/v0.0.42"}}, "errors": [], "warnings": [],
             "jobs": [v0_0_41(record) for record in data["jobs"]]}
    assert rows_of(json_attempts(newer, None), ()) == rows_of(json_attempts(data, None), ())


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1 << 16])
def test_bytes_that_are_not_utf8_are_read_column_wise_as_the_line_reader_reads_them(size):
    """A Latin-1 byte in a job name sent a 1M-job file to the line reader (39 CPU s against 13);
    the column-wise reader now reads it as U+FFFD, in blocks of any size (a character of two to
    four bytes cut by a block's end is joined to the next)."""
    from connectors.sacct_stream import RecordStream

    text = "JobName\ncaf\u00e9 \u2603 \U0001f600\n".encode() + b"caf\xe9\n\xf0\x9f\n"
    stream = RecordStream(io.BytesIO(text), ["JobName"])
    read = b"".join(iter(lambda: stream.read(size), b""))
    assert read.decode() == "".join(line.decode(errors="replace") for line in text.splitlines(True))
    assert stream.not_utf8 == (3, 0xE9) and stream.cut is None


def test_a_file_with_a_byte_that_is_not_utf8_is_read_column_wise_and_said_once(tmp_path, monkeypatch, caplog):
    import connectors.sacct_files as sacct_files

    whole = (SLURM / "sacct-formats-parsable2.txt").read_bytes()
    (tmp_path / "sacct.txt").write_bytes(whole.replace(b"|het.sh|", b"|h\xe9t.sh|", 1))
    monkeypatch.setattr(sacct_files, "parsable_attempts", None)  # the line reader is not called
    with caplog.at_level("WARNING"):  # taken after the capture's jobs started (2026-12-04)
        assert run(tmp_path, datetime(2026, 12, 5), path=str(tmp_path / "sacct.txt")).error is None
    assert [r.getMessage() for r in caplog.records] == [f"{tmp_path / 'sacct.txt'}: line 20: byte 0xe9 is not UTF-8: "
                                                        "read as U+FFFD, as any later (a job name or comment?)"]
    assert ("7+0", "h\ufffdt.sh") in jobs(tmp_path, "job_id, name")


def test_times_with_a_strftime_z_offset_are_counted_in_sql(tmp_path, monkeypatch):
    """SLURM_TIME_FORMAT=%FT%T%z (`2026-12-04T17:05:22+0100`): each distinct time went to Python,
    as `+01:00` does not: the rows were right, 1M jobs took 23.9 CPU s against 18.1 now."""
    import connectors.sacct_columns as sacct_columns

    def shifted(match: re.Match) -> str:  # the same instant an hour east of UTC
        return (datetime.fromisoformat(match.group()) + timedelta(hours=1)).isoformat() + "+0100"

    whole = (SLURM / "sacct-formats-parsable2.txt").read_text()
    (tmp_path / "sacct.txt").write_text(re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", shifted, whole))
    assert run(tmp_path / "utc", path=str(SLURM / "sacct-formats-parsable2.txt")).error is None
    monkeypatch.setattr(sacct_columns, "parse_sacct_time", None)  # not called
    assert run(tmp_path, path=str(tmp_path / "sacct.txt"), timezone="Asia/Tokyo").error is None
    assert jobs(tmp_path, "* EXCLUDE (snapshot_date)") == jobs(tmp_path / "utc", "* EXCLUDE (snapshot_date)")


@pytest.mark.parametrize("name", ["sacct-line-break-parsable2.txt", "sacct-line-break-parsable.txt"])
def test_a_line_break_in_a_comment_continues_the_record_not_fails_the_source(tmp_path, monkeypatch, name):
    """Slurm 22.05.8, `--comment="$(printf 'run=x\\ny|z')"`: sacct prints the break, and the
    record's second line (`y|z`) failed every job of the file ("line 3: 2 fields where the
    header has 17"); read column-wise too, as the line reader reads it."""
    assert run(tmp_path / "json", path=str(SLURM / "sacct-line-break.json")).error is None
    assert read_by_both(tmp_path, monkeypatch, SLURM / name) == jobs(tmp_path / "json", "* EXCLUDE (snapshot_date)")
    assert jobs(tmp_path / "columns", "name, labels") == [("a\tb", {"run": "x", "comment": "run=x\ny|z"})]  # its key=value word


def read_by_both(tmp_path, monkeypatch, path) -> list[tuple]:
    """The jobs of the sacct file `path` read column-wise (the line reader not called) and line
    by line: the same rows, returned."""
    import connectors.sacct_columns as sacct_columns
    import connectors.sacct_files as sacct_files

    line_reader = sacct_files.parsable_attempts
    monkeypatch.setattr(sacct_files, "parsable_attempts", None)
    assert run(tmp_path / "columns", path=str(path)).error is None
    column_wise = jobs(tmp_path / "columns", "* EXCLUDE (snapshot_date)")
    monkeypatch.setattr(sacct_files, "parsable_attempts", line_reader)
    monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    assert run(tmp_path / "lines", path=str(path)).error is None
    assert jobs(tmp_path / "lines", "* EXCLUDE (snapshot_date)") == column_wise
    return column_wise


def sacct_line(raw: int, name: str, gpus: int, end: str = "2026-12-01T11:00:05", step: str = "") -> str:
    """An allocation (or a step) in SACCT_FORMAT's order: JobName and Comment last."""
    return (f"{raw}{step}|{raw}{step}|p5|gpu|ana|u1|normal|*|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|"
            f"{end}|01:00:00|p5-001|gres/gpu={gpus}|{name}|run=r{raw}\n")


def test_a_pipe_in_job_names_keeps_the_file_column_wise_with_the_line_readers_rows(tmp_path, monkeypatch, caplog):
    """A `|` in one job name (sacct does not escape it) sent the whole file to the line reader:
    1M jobs took 44 CPU s against 13-21. Only the lines with more fields than the header are now
    placed by the line reader's rule; the rest is read in blocks, and a record listed twice (an
    export appended to another) keeps the later one, wherever those lines fell."""
    import connectors.jobs_file_columns as jobs_file_columns
    import connectors.sacct_columns  # noqa: F401  (its Arrow imports, before the line reader is taken away)
    from connectors.slurm_records import SACCT_FORMAT

    lines = [SACCT_FORMAT.replace(",", "|") + "\n"]
    for n in range(1, 400):
        lines.append(sacct_line(n, f"eval|sweep {n}" if n % 37 == 0 else f"train {n}", 8))
        if n % 50 == 0:
            lines.append(sacct_line(n, "a|step", 8, step=".batch") + "\n")  # a step; a blank line
    lines.append(sacct_line(74, "again", 4))  # 74 was a line apart: this later one counts
    lines.append(sacct_line(75, "again|apart", 2))  # 75 was read in blocks: this line apart counts
    path = tmp_path / "sacct.txt"
    path.write_text("".join(lines))
    monkeypatch.setattr(jobs_file_columns, "BLOCK_BYTES", 4096)  # blocks end between and beside the lines apart
    rows = read_by_both(tmp_path, monkeypatch, path)
    assert len(rows) == 399
    assert [(row[1], row[17], row[9]) for row in rows if row[1] in ("37", "74", "75")] == [
        ("37", "eval|sweep 37", 8.0), ("74", "again", 4.0), ("75", "again|apart", 2.0)]
    # once per file read (here by each reader), not once per line: a month may have thousands
    said = [record.getMessage() for record in caplog.records if "side by side" in record.getMessage()]
    assert said == [f"{path}: 18 line(s) with a '|' inside JobName or Comment, which sit side by side: read as "
                    "part of JobName (first: line 38, job 37)"] * 2, said


def test_a_pipe_in_free_text_between_other_columns_fails_at_once_naming_the_line(tmp_path, monkeypatch):
    """Which of two free-text columns apart holds a `|` cannot be told: the file fails naming its
    line without a second read line by line."""
    import connectors.sacct_files as sacct_files

    header = "JobID|JobIDRaw|JobName|State|Submit|Start|End|NodeList|AllocTRES|Comment"
    good = "1|1|eval|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T11:00:05|p5-001|gres/gpu=2|x\n"
    (tmp_path / "sacct.txt").write_text(header + "\n" + good * 3 + good.replace("|eval|", "|ev|al|"))
    monkeypatch.setattr(sacct_files, "parsable_attempts", None)  # not called
    error = run(tmp_path, path=str(tmp_path / "sacct.txt")).error
    assert f"{tmp_path / 'sacct.txt'}: line 5: 11 fields where the header has 10 (a '|' inside Comment or JobName?" \
        in str(error), error


def test_a_file_the_column_wise_reader_gives_up_is_read_again_whole(tmp_path, monkeypatch):
    """pyarrow reads ahead in a thread of its own, still reading after its reader had failed: the
    line reader, reading the same open file again from its start, lost a 16 MB read now and then
    (a bare CR in one comment of a 200k-job file failed 2 runs of 5: `line 79: 16 fields where
    the header has 17`). The column-wise reader's stream reads nothing once it has given up (here:
    a '|' in a name past APART_MOST)."""
    import connectors.sacct_columns as sacct_columns
    import connectors.sacct_stream as sacct_stream

    streams = []

    class Seen(sacct_columns.RecordStream):
        def __init__(self, *args):
            super().__init__(*args)
            streams.append(self)

    monkeypatch.setattr(sacct_columns, "RecordStream", Seen)
    monkeypatch.setattr(sacct_stream, "APART_MOST", 0)  # the first '|' in a name: given up
    path = tmp_path / "sacct.txt"
    path.write_text(HEADER + "\n" + allocation(1, "a|b") + "".join(allocation(n) for n in range(2, 2001)))
    assert run(tmp_path, path=str(path)).error is None
    [stream] = streams
    assert stream.stopped and stream.read(1 << 20) == b""
    assert len(jobs(tmp_path, "job_id")) == 2000


def test_texts_padded_with_any_whitespace_python_strips_are_read_column_wise_as_by_the_line_reader(tmp_path,
                                                                                                     monkeypatch):
    """The column-wise reader strips texts in Arrow (utf8_trim over str.isspace()'s characters),
    not in SQL: the same rows as the line reader's str.strip()."""
    from connectors.slurm_records import SACCT_FORMAT

    padded = [" 1\x1c", "1 ", "\u2003p5\x85", " gpu ", "\tana", "u1\u3000", "normal", "*x", "COMPLETED",
              " 2026-12-01T10:00:00 ", "2026-12-01T10:00:05\u2029", "2026-12-01T11:00:05", "01:00:00", "p5-001",
              "gres/gpu=2", "\x1fname x\u00a0", "  run=r1  "]
    blank = ["2", "2", "p5", "gpu", "ana", "u1", "normal", "", "RUNNING", "2026-12-01T10:00:00", "2026-12-01T10:00:05",
             "Unknown", "01:00:00", "p5-001", "gres/gpu=2", "  ", "\x0b"]
    path = tmp_path / "sacct.txt"
    path.write_text("".join("|".join(fields) + "\n" for fields in (SACCT_FORMAT.split(","), padded, blank)))
    rows = read_by_both(tmp_path, monkeypatch, path)
    assert [row[:3] + row[17:18] for row in rows] == [("p5/1@1796119200", "1", "r1", "name x"),
                                                      ("p5/2@1796119200", "2", "2", None)]


def test_a_file_with_a_pipe_in_most_job_names_goes_to_the_line_reader_which_batches(tmp_path, monkeypatch):
    """The lines held apart are Python text until the file's end: past APART_MOST (a name with a
    `|` in most of a million jobs) the file is read line by line, a batch of records at a time."""
    import connectors.sacct_files as sacct_files
    import connectors.sacct_stream as sacct_stream
    from connectors.slurm_records import SACCT_FORMAT

    path = tmp_path / "sacct.txt"
    path.write_text(SACCT_FORMAT.replace(",", "|") + "\n" + "".join(sacct_line(n, f"a|{n}", 8) for n in range(1, 12)))
    monkeypatch.setattr(sacct_stream, "APART_MOST", 10)
    line_reads = []
    line_reader = sacct_files.parsable_attempts
    monkeypatch.setattr(sacct_files, "parsable_attempts", lambda *args: line_reads.append(1) or line_reader(*args))
    assert run(tmp_path, path=str(path)).error is None
    assert line_reads == [1] and len(jobs(tmp_path, "job_id")) == 11
    monkeypatch.setattr(sacct_stream, "APART_MOST", 11)
    assert run(tmp_path / "columns", path=str(path)).error is None
    assert line_reads == [1] and jobs(tmp_path / "columns", "* EXCLUDE (snapshot_date)") == jobs(
        tmp_path, "* EXCLUDE (snapshot_date)")


def broken_lines() -> str:
    """README's --format order, with what sacct prints as it is: a line break in a job name or
    comment (a `|` in the text after it too), a bare CR, blank lines, CRLF and CR CR LF ends."""
    from connectors.slurm_records import SACCT_FORMAT

    lines = [SACCT_FORMAT.replace(",", "|") + "\n"]
    for n in range(1, 300):
        line = sacct_line(n, f"train {n}", 8)
        line = {0: line.replace(f"|run=r{n}", f"|run=r{n}\nnotes: resumed"),  # a comment over two lines
                1: line.replace(f"|train {n}|", f"|train\nx{n}|"),  # a name over two lines: the first short
                2: line.replace(f"|run=r{n}", f"|run=r{n}\rnotes"),  # a bare CR
                3: line.replace(f"|run=r{n}", f"|run=x{n}\n\ny|z\n"),  # a break, a blank line, a '|' after
                4: line.replace("\n", "\r\n"), 5: line + "  \t\n", 6: line.replace("\n", "\r\r\n"),
                7: line.replace(f"|train {n}|", f"|eval|{n}|")}.get(n % 23, line)
        lines.append(line)
        if n % 40 == 0:
            lines.append(sacct_line(n, "a\nstep", 8, step=".batch") + "\r\n")
    lines.append(sacct_line(46, "again\nlater", 4))  # 46 was held apart, 47 not: these later ones count
    lines.append(sacct_line(47, "again", 2))
    return "".join(lines)


@pytest.mark.parametrize("block", [256, 4096])
def test_line_breaks_and_bare_crs_in_free_text_keep_the_file_column_wise_with_the_line_readers_rows(
        tmp_path, monkeypatch, block):
    """A bare CR (pyarrow ends a row at it) or a line with fewer fields than the header (a line
    break in a job name or comment, which sacct prints as it is) sent the whole file to the line
    reader: 44 CPU s for 1M jobs. Such records are now held apart as the lines with a `|` in free
    text are and placed by the line reader's rule, wherever the blocks end (here between every
    line or two); blank lines are left out."""
    import connectors.jobs_file_columns as jobs_file_columns

    path = tmp_path / "sacct.txt"
    path.write_bytes(broken_lines().encode())
    monkeypatch.setattr(jobs_file_columns, "BLOCK_BYTES", block)
    assert len(read_by_both(tmp_path, monkeypatch, path)) == 299
    names = {job: (name, gpus, labels.get("comment")) for job, name, gpus, labels in jobs(
        tmp_path / "columns", "job_id, name, gpus, labels")}
    assert names["23"] == ("train 23", 8.0, "run=r23\nnotes: resumed")
    assert names["24"] == ("train\nx24", 8.0, "run=r24")
    assert names["25"] == ("train 25", 8.0, "run=r25\rnotes")
    assert names["26"] == ("train 26", 8.0, "run=x26\ny|z")
    assert names["46"] == ("again\nlater", 4.0, "run=r46") and names["47"] == ("again", 2.0, "run=r47")


def test_a_last_line_cut_short_fails_as_the_line_reader_fails_it_without_reading_the_file_again(tmp_path,
                                                                                                 monkeypatch):
    """A file cut short (still being written) went to the line reader only for it to say so."""
    import connectors.sacct_files as sacct_files

    path = tmp_path / "sacct.txt"
    path.write_text(broken_lines() + sacct_line(400, "cut", 16)[:-9])
    said = str(run(tmp_path / "lines", path=str(path)).error)
    assert f"{path}: line 403, the last, has no line end: the file was cut short" in said, said
    monkeypatch.setattr(sacct_files, "parsable_attempts", None)  # not called
    assert str(run(tmp_path / "columns", path=str(path)).error) == said


def test_a_short_line_no_record_continues_fails_naming_it_without_reading_the_file_again(tmp_path, monkeypatch):
    """A line with fewer fields than the header that begins with a job id continues no record."""
    import connectors.sacct_files as sacct_files

    path = tmp_path / "sacct.txt"
    path.write_text(broken_lines() + sacct_line(400, "x", 8)[:40] + "\n" + sacct_line(401, "x", 8))
    said = str(run(tmp_path / "lines", path=str(path)).error)
    assert f"{path}: line 403: 9 fields where the header has 17" in said, said
    monkeypatch.setattr(sacct_files, "parsable_attempts", None)  # not called
    assert str(run(tmp_path / "columns", path=str(path)).error) == said


@pytest.mark.parametrize("delimiter", [";", "\t", "::"])
def test_sacct_delimiter_is_read_from_the_header_line(tmp_path, monkeypatch, delimiter):
    """`sacct --parsable2 --delimiter=';'` (or a tab: used to keep a `|` in names apart) failed:
    'not a sacct --parsable2 header'. The header line, the --format list, says which delimiter
    separates the fields, and the file reads as with `|`, free text holding it included (a
    delimiter of two characters, which pyarrow does not take, is read line by line)."""
    from connectors.slurm_records import SACCT_FORMAT

    text = broken_lines().replace("|train 2|", "|ev|al 2|")  # a delimiter in a job name too
    assert text.startswith(SACCT_FORMAT.replace(",", "|") + "\n")
    (tmp_path / "piped").mkdir()
    (tmp_path / "piped" / "sacct.txt").write_text(text)
    assert run(tmp_path / "piped", path=str(tmp_path / "piped" / "sacct.txt")).error is None
    path = tmp_path / "sacct.txt"
    path.write_text(text.replace("|", delimiter))
    if len(delimiter) == 1:
        rows = read_by_both(tmp_path, monkeypatch, path)
    else:
        assert run(tmp_path / "lines", path=str(path)).error is None
        rows = jobs(tmp_path / "lines", "* EXCLUDE (snapshot_date)")
    piped = jobs(tmp_path / "piped", "* EXCLUDE (snapshot_date)")

    def swapped(value):  # the `|` in a text (a name, a comment and its label) as the delimiter
        if isinstance(value, dict):
            return {key: swapped(text) for key, text in value.items()}
        return value.replace("|", delimiter) if isinstance(value, str) else value

    assert rows == [tuple(map(swapped, row)) for row in piped]
    assert ("2", f"ev{delimiter}al 2") in jobs(tmp_path / ("columns" if len(delimiter) == 1 else "lines"),
                                               "job_id, name")


@pytest.mark.parametrize("delimiter", [",", " ", "/", ":"])
def test_a_delimiter_saccts_own_columns_print_fails_naming_it_not_reads_zero_gpus(tmp_path, delimiter):
    """`sacct --delimiter=,` was read: a real AllocTRES (`billing=192,cpu=192,gres/gpu=8,...`)
    split at its commas, the extra fields went to JobName as a name's would, and every job read
    0 GPUs (its cost idle) with a name of TRES, exit 0, the warning sending the operator to
    AccountingStorageTRES. No rule can place such fields: the file fails naming the delimiter."""
    from tests.test_slurm_jobs import cli_inventory

    tres = "billing=192,cpu=192,gres/gpu=8,mem=2000G,node=1"
    lines = [sacct_line(n, "x", 8).replace("gres/gpu=8", tres) for n in (200, 201)]
    path = tmp_path / "sacct.txt"
    path.write_text("".join([broken_lines().split("\n")[0] + "\n", *lines]).replace("|", delimiter))
    result = cli_inventory(tmp_path, path)
    assert result.exit_code == 3, result.output
    assert (f"{path}: line 1: sacct --delimiter={delimiter!r} cannot be read: sacct's own columns print it too"
            in result.output), result.output
    assert "--delimiter=';', a tab, or without --delimiter" in result.output


def test_a_header_no_delimiter_parses_fails_naming_the_file_and_the_fix(tmp_path):
    from tests.test_slurm_jobs import cli_inventory

    path = tmp_path / "sacct.txt"
    path.write_text("JobID;JobIDRaw,State;Submit;Start;End;NodeList;AllocTRES\n1;1;COMPLETED\n")
    result = cli_inventory(tmp_path, path)
    assert result.exit_code == 3, result.output
    assert (f"{path}: line 1: not a sacct --parsable2 header: no one delimiter ('|', or the one given to sacct "
            "--delimiter) separates the column names JobID, JobIDRaw, State, Submit, Start, End, NodeList, AllocTRES "
            "in it") in result.output, result.output
    assert "in it — write it with sacct --json, or sacct --parsable2 --format=JobID,JobIDRaw," in result.output


def test_a_gzip_file_cut_short_fails_as_the_line_reader_fails_it_without_reading_the_file_again(tmp_path,
                                                                                                monkeypatch):
    """A .gz export cut short (copied while written) went to the line reader only for it to say so
    (one of less than a block, 16 MB, still does: its header is in the read that fails)."""
    import gzip

    import connectors.jobs_file_columns as jobs_file_columns
    import connectors.sacct_files as sacct_files

    monkeypatch.setattr(jobs_file_columns, "BLOCK_BYTES", 4096)
    path = tmp_path / "sacct.txt.gz"
    whole = gzip.compress(broken_lines().encode())
    path.write_bytes(whole[:len(whole) * 2 // 3])
    said = str(run(tmp_path / "lines", path=str(path)).error)
    assert f"{path}: not a whole gzip file (Compressed file ended before the end-of-stream marker was reached)" \
        in said, said
    monkeypatch.setattr(sacct_files, "parsable_attempts", None)  # not called
    assert str(run(tmp_path / "columns", path=str(path)).error) == said
