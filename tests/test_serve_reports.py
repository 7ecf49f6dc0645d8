"""`spendlake serve` serves the daily reports from their folder: an index of the days, each
day's files with their type, length and validators, the newest by `/reports/latest/`, behind
the API's token, and nothing outside the files the report writer writes."""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from datetime import date, timedelta
from email.utils import formatdate, parsedate_to_datetime

import pytest
from prometheus_client import CollectorRegistry

from report_fixtures import sample_report
from service.core.config import parse_config
from service.core.publish import write_local
from service.report.render import SCRIPT_HASH, render_files
from service.serve import report_store
from service.serve.app import Api
from service.serve.reports import PAGE_DAYS

TOKEN = "s3cret-token-0123456789"
FILES = render_files(sample_report())  # what `spendlake report` writes for one day
DAY = "2026-11-29"
LISTED = ["report.html", "report.json", "summary.md", "spend_by_team.csv", "top_experiments.csv", "waste_by_rule.csv"]


def write_day(out, day: str = DAY, files: dict[str, bytes] = FILES) -> None:
    write_local(files, out / day, last="report.html")  # the report writer's own publishing


@pytest.fixture
def serve(tmp_path, api_server):
    """`start(out, token)`: a running server whose report.out is `out` (default tmp/reports); its port."""

    def start(out=None, token: str | None = None) -> int:
        config = parse_config({"lake": str(tmp_path / "lake"), "report": {"out": str(out or tmp_path / "reports")},
                               "service": {"listen": "127.0.0.1:0"}}, str(tmp_path / "spendlake.yaml"))
        return api_server(Api(config, CollectorRegistry(), token=token))

    return start


def request(port: int, target: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    """The request line sent as given (no client tidies `..` or `%00` away); status, headers, body."""
    head = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{method} {target} HTTP/1.1\r\nHost: localhost\r\n{head}\r\n".encode("latin-1"))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    return int(lines[0].split()[1]), dict(line.split(": ", 1) for line in lines[1:]), body


def error(body: bytes) -> str:
    return json.loads(body)["error"]["message"]


def test_the_index_lists_the_days_newest_first_and_latest_is_the_newest_complete_day(tmp_path, serve):
    out = tmp_path / "reports"
    write_day(out, "2026-11-28")
    write_day(out, DAY)
    write_day(out, "2026-11-30", {"totals.csv": b"x\n"})  # being written: report.html comes last
    port = serve()

    status, headers, page = request(port, "/reports/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    text = page.decode()
    assert f'Newest complete: <a href="{DAY}/report.html">{DAY}</a>' in text
    text = text.partition("<tbody>")[2]
    assert text.index("2026-11-30") < text.index(f'href="{DAY}/report.html"') < text.index('href="2026-11-28/report.html"')
    assert f'href="{DAY}/summary.md"' in text and f'href="{DAY}/spend_by_team.csv"' in text
    assert text.index(f'href="{DAY}/summary.md"') < text.index(f'href="{DAY}/spend_by_team.csv"')
    assert "being written" in text and 'href="2026-11-30/' not in text
    listed = json.loads(request(port, "/api/v1/reports")[2])
    assert listed["latest"] == DAY and [d["day"] for d in listed["days"]] == ["2026-11-30", DAY, "2026-11-28"]
    assert [f["name"] for f in listed["days"][1]["files"]] == LISTED  # the page and its data first
    assert listed["days"][1]["files"][0]["bytes"] == len(FILES["report.html"])

    assert request(port, "/reports/latest/")[1]["Location"] == f"../{DAY}/report.html"
    assert request(port, "/reports/latest/summary.md")[1]["Location"] == f"../{DAY}/summary.md"
    assert request(port, "/reports/latest")[1]["Location"] == f"{DAY}/report.html"
    assert request(port, "/reports")[1]["Location"] == "reports/"  # so the index's relative links resolve
    assert request(port, f"/reports/{DAY}/")[1]["Location"] == "report.html"


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_file_is_served_whole_with_its_type_length_and_validators(tmp_path, serve, name):
    write_day(tmp_path / "reports")
    settled(tmp_path / "reports")
    port = serve()
    status, headers, body = request(port, f"/reports/{DAY}/{name}")
    assert status == 200 and body == FILES[name]
    assert headers["Content-Length"] == str(len(FILES[name]))
    assert headers["Content-Type"] == {"html": "text/html; charset=utf-8", "json": "application/json",
                                       "csv": "text/csv; charset=utf-8",
                                       "md": "text/markdown; charset=utf-8"}[name.rsplit(".", 1)[1]]
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    assert headers["Cache-Control"] == "private, no-cache"
    if name == "report.html":  # the page's own inline styles and script, nothing else
        assert headers["Content-Security-Policy"] == (f"default-src 'none'; style-src 'unsafe-inline'; script-src "
                                                      f"'{SCRIPT_HASH}'; base-uri 'none'; form-action 'none'; "
                                                      "frame-ancestors 'none'")
    else:
        assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    if name.endswith((".csv", ".md")):
        assert headers["Content-Disposition"] == f'attachment; filename="spendlake-{DAY}-{name}"'

    status, again, body = request(port, f"/reports/{DAY}/{name}", If_None_Match=headers["ETag"])
    assert (status, body) == (304, b"")
    # a browser swaps its cached headers for a 304's: the page's policy must come again
    assert again["Content-Security-Policy"] == headers["Content-Security-Policy"]
    assert request(port, f"/reports/{DAY}/{name}", If_Modified_Since=headers["Last-Modified"])[0] == 304
    assert request(port, f"/reports/{DAY}/{name}", If_None_Match='"other"')[0] == 200
    status, head, body = request(port, f"/reports/{DAY}/{name}", "HEAD")
    assert (status, head["Content-Length"], body) == (200, str(len(FILES[name])), b"")


def settled(out, seconds: float = 5) -> None:
    """The report files' mtimes `seconds` back: written before the second now running."""
    for path in out.rglob("*"):
        os.utime(path, (path.stat().st_atime, path.stat().st_mtime - seconds))


def test_a_report_rewritten_within_its_second_is_no_304_on_if_modified_since(tmp_path, serve):
    """HTTP dates have whole seconds: a report rewritten in the second a client (curl -z) took
    its copy in has the same Last-Modified, so If-Modified-Since got a 304 for the old copy.
    A file still in its second now has no Last-Modified to compare (the ETag tells them apart)."""
    write_day(tmp_path / "reports")
    port = serve()
    path = tmp_path / "reports" / DAY / "report.json"
    now = time.time()
    os.utime(path, (now, now + 30))  # in a second not over yet (a writer's clock 30 s ahead keeps it so)
    copy = formatdate(now + 30, usegmt=True)  # the date of the client's copy, taken in that second
    status, headers, body = request(port, f"/reports/{DAY}/report.json", If_Modified_Since=copy)
    assert (status, body) == (200, FILES["report.json"]) and "Last-Modified" not in headers
    assert request(port, f"/reports/{DAY}/report.json", If_None_Match=headers["ETag"])[0] == 304
    settled(tmp_path / "reports", 60)  # its second over: the date says it, and a copy as new is current
    status, headers, _ = request(port, f"/reports/{DAY}/report.json", If_Modified_Since=copy)
    assert status == 304 and parsedate_to_datetime(headers["Last-Modified"]) <= parsedate_to_datetime(copy)


def test_a_report_written_again_has_a_new_etag(tmp_path, serve):
    write_day(tmp_path / "reports")
    port = serve()
    first = request(port, f"/reports/{DAY}/report.json")[1]["ETag"]
    write_day(tmp_path / "reports", files={**FILES, "report.json": b"{}\n"})
    status, headers, body = request(port, f"/reports/{DAY}/report.json", If_None_Match=first)
    assert (status, body) == (200, b"{}\n") and headers["ETag"] != first


HOSTILE = [
    "/reports/../../etc/passwd", f"/reports/{DAY}/../../../etc/passwd", "/reports/%2e%2e/%2e%2e/etc/passwd",
    f"/reports/{DAY}/..%2f..%2fsecret.csv", f"/reports/{DAY}%2freport.html", f"/reports/{DAY}%5creport.html",
    f"/reports/{DAY}\\report.html", f"/reports/{DAY}/report.html%00.csv", f"/reports/{DAY}/report.html\x00",
    "/reports//etc/passwd", "/reports/etc/passwd", f"/reports/{DAY}/secret.csv/x", f"/reports/{DAY}/notes.txt",
    f"/reports/{DAY}/REPORT.HTML", f"/reports/{DAY}/.hidden.csv", "/reports/2026-02-30/report.html",
    "/reports/26-11-29/report.html", "/reports/2026-11-29 /report.html", "/reports/latest/../../secret.csv",
    "/reports/latest/..", f"/reports/{DAY}/report.html/",
]


def test_nothing_but_a_days_report_files_is_reachable(tmp_path, serve):
    """`..`, its encodings, encoded slashes, backslashes, NUL, other names: a 404 (or the
    server's 400 for a request line it cannot read), never a byte of another file."""
    out = tmp_path / "reports"
    write_day(out)
    (out / DAY / "notes.txt").write_text("SECRET")
    (out / DAY / "secret.csv" / "x").mkdir(parents=True)
    (tmp_path / "secret.csv").write_text("SECRET")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("SECRET")
    port = serve()
    for target in HOSTILE:
        status, headers, body = request(port, target)
        assert status in (400, 404) and b"SECRET" not in body, target
        assert headers["Content-Type"] == "application/json; charset=utf-8", target


def test_only_the_index_takes_before(tmp_path, serve):
    """`?before=` pages the index; on a file, a day or latest it asks for nothing and is an
    unknown parameter like any other, and `/reports?before=` keeps the page it asked for."""
    write_day(tmp_path / "reports")
    port = serve()
    for target in (f"/reports/{DAY}/report.html", f"/reports/{DAY}/", f"/reports/{DAY}", "/reports/latest/",
                   "/reports/latest/summary.md"):
        status, _, body = request(port, f"{target}?before=2026-11-30")
        assert (status, error(body)) == (400, "unknown parameter(s): before"), target
        assert request(port, target)[0] in (200, 302), target
    assert request(port, "/reports?before=2026-11-30")[1]["Location"] == "reports/?before=2026-11-30"
    assert f"<th>{DAY}</th>" in request(port, "/reports/?before=2026-11-30")[2].decode()
    assert f"<th>{DAY}</th>" not in request(port, f"/reports/?before={DAY}")[2].decode()


def test_links_fifos_and_folders_in_the_reports_folder_are_not_followed(tmp_path, serve):
    out = tmp_path / "reports"
    write_day(out)
    outside = tmp_path / "outside"
    write_day(outside, "2026-11-27", {**FILES, "report.json": b'"SECRET"'})
    (tmp_path / "secret").write_text("SECRET")
    (out / DAY / "spend_by_team.csv").unlink()
    (out / DAY / "spend_by_team.csv").symlink_to(tmp_path / "secret")  # a file linking outside
    (out / "2026-11-27").symlink_to(outside / "2026-11-27")  # a day folder that is a link
    (out / DAY / "summary.md").unlink()
    os.mkfifo(out / DAY / "summary.md")  # opening it for reading would wait for a writer
    (out / DAY / "anomalies.csv").mkdir()
    port = serve()
    for name in ("spend_by_team.csv", "summary.md", "anomalies.csv"):
        status, _, body = request(port, f"/reports/{DAY}/{name}")
        assert status == 404 and "not a report file" in error(body), name
    status, _, body = request(port, "/reports/2026-11-27/report.json")
    assert status == 404 and error(body) == ("the reports folder's 2026-11-27 is a link or not a report folder: not "
                                             "served (the report writer makes plain folders and files)")
    (out / "2026-11-26").write_text("SECRET")  # a file where a day folder would be
    status, _, body = request(port, "/reports/2026-11-26/report.html")
    assert status == 404 and error(body).startswith("the reports folder's 2026-11-26 is a link or not a report folder")
    index = request(port, "/reports/")[2].decode()
    assert "2026-11-27" not in index and "spend_by_team.csv" not in index and "summary.md" not in index
    assert request(port, f"/reports/{DAY}/report.json")[0] == 200  # the rest of the day is served


def test_a_day_without_report_html_yet_is_a_404_saying_it_is_being_written(tmp_path, serve):
    write_day(tmp_path / "reports", files={k: v for k, v in FILES.items() if k != "report.html"})
    port = serve()
    for name in ("report.html", "report.json"):
        status, _, body = request(port, f"/reports/{DAY}/{name}")
        assert status == 404 and error(body) == (f"the report of {DAY} is not complete: report.html is written last "
                                                 "(being written now, or its run failed)")
    status, _, body = request(port, "/reports/latest/")
    assert status == 404 and error(body).startswith("no complete report yet in the reports folder: ")


@pytest.mark.parametrize("state", ["missing", "empty", "a file"])
def test_no_reports_folder_yet_is_an_empty_index_and_a_404_naming_where(tmp_path, serve, state, caplog):
    """Named as `the reports folder` to the client, its path in the service's log."""
    caplog.set_level("INFO", logger="service.serve")
    out = tmp_path / "reports"
    if state == "empty":
        out.mkdir()
    elif state == "a file":
        out.write_text("x")
    port = serve()
    status, _, body = request(port, f"/reports/{DAY}/report.html")
    said = {"missing": "no reports yet: {} does not exist", "empty": f"no report of {DAY} in {{}}",
            "a file": "{} is a file, not a folder of reports"}[state]
    assert status == 404 and error(body) == said.format("the reports folder")
    assert said.format(out) in caplog.text
    if state == "a file":  # every page says so
        assert [request(port, target)[0] for target in ("/reports/", "/reports/latest/", "/api/v1/reports")] == [404] * 3
        return
    status, _, body = request(port, "/reports/latest/")
    assert status == 404 and "in the reports folder: the service writes the day before's at 06:00 UTC" in error(body)
    status, _, body = request(port, "/reports/")
    assert status == 200 and "No complete report yet" in body.decode() and str(tmp_path) not in body.decode()
    assert json.loads(request(port, "/api/v1/reports")[2]) == {"location": "the reports folder", "latest": None,
                                                               "days": [], "older": None}


def test_a_file_removed_while_the_index_is_listed_is_left_out_not_a_500(tmp_path, serve, monkeypatch):
    """A report written again removes the CSVs it no longer writes, maybe between the listing
    of a day and the look at each file's size."""
    write_day(tmp_path / "reports")
    port = serve()
    listed = os.scandir

    def then_removed(path):
        entries = list(listed(path))
        if str(path).endswith(DAY):
            (tmp_path / "reports" / DAY / "waste_by_rule.csv").unlink(missing_ok=True)
        return iter(entries)

    monkeypatch.setattr(os, "scandir", then_removed)
    status, _, body = request(port, "/api/v1/reports")
    assert status == 200 and [f["name"] for f in json.loads(body)["days"][0]["files"]] == LISTED[:-1]


def test_an_unreadable_report_file_is_a_503_naming_it_and_logged(tmp_path, serve, monkeypatch, caplog):
    write_day(tmp_path / "reports")
    port = serve()
    real_open = os.open

    def denied(path, flags, *args, **kwargs):
        if path == "report.json":
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    status, _, body = request(port, f"/reports/{DAY}/report.json")
    answer = json.loads(body)["error"]
    assert status == 503 and answer["message"] == "cannot read the reports: Permission denied"
    assert answer["where"] == f"the reports folder's {DAY}/report.json"
    assert any("Permission denied" in r.getMessage() and str(tmp_path / "reports" / DAY / "report.json") in r.getMessage()
               for r in caplog.records if r.levelname == "ERROR")


def test_reports_need_the_token_as_bearer_or_as_the_basic_password(tmp_path, serve):
    write_day(tmp_path / "reports")
    port = serve(token=TOKEN)
    basic = base64.b64encode(f"finance:{TOKEN}".encode()).decode()
    wrong = base64.b64encode(b"finance:guess-guess-guess").decode()
    for target in ("/reports/", f"/reports/{DAY}/report.html", "/reports/latest/", "/reports/../x"):
        status, headers, _ = request(port, target)
        assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="spendlake reports", charset="UTF-8"'
        assert request(port, target, Authorization=f"Basic {wrong}")[0] == 401
        assert request(port, target, Authorization="Basic !!!")[0] == 401
    assert request(port, f"/reports/{DAY}/report.html", Authorization=f"Bearer {TOKEN}")[0] == 200
    assert request(port, f"/reports/{DAY}/report.html", Authorization=f"Basic {basic}")[0] == 200
    status, headers, _ = request(port, "/api/v1/reports")
    assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="spendlake"'
    assert request(port, "/api/v1/reports", Authorization=f"Bearer {TOKEN}")[0] == 200


def test_the_index_escapes_what_it_shows(tmp_path, serve):
    out = tmp_path / "<script>alert(1)</script>"  # a local folder is said by name, not shown (an S3 prefix is, escaped)
    write_day(out)
    body = request(serve(out), "/reports/")[2].decode()
    assert "<script>" not in body and "From the reports folder." in body and str(tmp_path) not in body


def test_a_large_file_is_sent_in_chunks_not_read_whole(tmp_path):
    big = b"team,cost\n" + b"pretrain,1.00\n" * 200_000  # 2.8 MB
    write_day(tmp_path / "reports", files={**FILES, "spend_by_team.csv": big})
    config = parse_config({"lake": str(tmp_path / "lake"), "report": {"out": str(tmp_path / "reports")}})
    response = Api(config, CollectorRegistry()).handle(f"/reports/{DAY}/spend_by_team.csv", {}, None)
    try:
        chunks = list(response.stream.chunks)
    finally:
        response.stream.close()
    assert response.body == b"" and response.stream.length == len(big) and b"".join(chunks) == big
    assert max(map(len, chunks)) == report_store.CHUNK < len(big)


def test_the_days_are_real_dates(tmp_path):
    assert report_store.report_day(DAY) == date(2026, 11, 29)
    assert [report_store.report_day(t) for t in ("2026-02-30", "2026-1-01", "٢٠٢٦-١١-٢٩", "2026-11-29\n")] == [None] * 4


@pytest.mark.slow
def test_a_thousand_days_page_by_a_month_and_only_the_shown_days_are_looked_into(tmp_path, serve, monkeypatch):
    out = tmp_path / "reports"
    days = [(date(2024, 1, 1) + timedelta(n)).isoformat() for n in range(1000)]
    for day in days:
        write_day(out, day, {"report.html": b"x", "summary.md": b"x"} if day != days[-1] else {"summary.md": b"x"})
    port = serve()
    scanned, listed = [], os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: scanned.append(os.path.basename(path)) or listed(path))

    page = json.loads(request(port, "/api/v1/reports")[2])
    assert [d["day"] for d in page["days"]] == days[::-1][:PAGE_DAYS] and page["latest"] == days[-2]
    assert scanned == ["reports", *days[::-1][:PAGE_DAYS]]  # the folders' names, then the shown days' files
    assert page["older"] == f"/api/v1/reports?before={days[-PAGE_DAYS]}"
    older = json.loads(request(port, page["older"])[2])
    assert [d["day"] for d in older["days"]] == days[::-1][PAGE_DAYS:2 * PAGE_DAYS] and older["latest"] == days[-2]
    oldest = request(port, f"/reports/?before={days[PAGE_DAYS]}")[2].decode()
    assert f"<th>{days[0]}</th>" in oldest and '<a href="./">newest days</a>' in oldest and "older days" not in oldest
    del scanned[:]
    assert request(port, "/reports/latest/")[1]["Location"] == f"../{days[-2]}/report.html"
    assert scanned == ["reports"]
    status, _, body = request(port, "/reports/?before=2024-02-30")
    assert status == 400 and json.loads(body)["error"]["message"] == "before='2024-02-30' is not a day"
