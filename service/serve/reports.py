"""`/reports/`: the daily reports, served where `spendlake report` wrote them (report.out, a
folder or an s3:// prefix; service/serve/report_store.py reads it).

- `/reports/` an HTML index of the days, newest first; `/api/v1/reports` the same as JSON. A page
  holds the newest PAGE_DAYS days with their files and links to older ones (`?before=<day>`), so
  a click after years of reports lists one page's files, not every day's. Only the index takes
  `before`: on any other path it is an unknown parameter (400), as every route answers one.
- `/reports/<YYYY-MM-DD>/<file>` one of the files the report writer writes, streamed, with an
  ETag and Last-Modified (a browser's revalidation is a 304) and `private, no-cache`: a report
  written again is seen at once, and no shared cache keeps spend. A file still in the second it
  was written gets no Last-Modified: a rewrite within that second would carry the same date.
- `/reports/latest/` (and `/reports/latest/<file>`) redirect to the newest complete day, so a
  bookmark always opens today's report and the address bar says which day it is.
- report.html gets a policy that lets exactly it render (its inline styles, its one script by
  hash, no network); everything else keeps the service's `default-src 'none'`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import PurePosixPath
from urllib.parse import urlencode

from markupsafe import escape

from service.core.config import Config
from service.core.errors import UsageError
from service.core.publish import CONTENT_TYPES
from service.core.timewindow import iso_utc
from service.report.render import SCRIPT_HASH
from service.report.write import default_out
from service.serve.http import Response, error_response, json_response
from service.serve.report_store import FILE_NAME, LAST, ReportDay, ReportNotFound, report_day, report_store
from service.serve.unpathed import Unpathed

FRAMING = "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
# style-src: the report's <style> and SVG presentation; with default-src 'none' no style can
# load anything (no url()), so inline styles only change looks. The script only marks the page.
REPORT_CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'; {FRAMING}"
INDEX_STYLE = ("body{font-family:system-ui,sans-serif;margin:24px;color:#1f2328}"
               "th,td{padding:4px 12px 4px 0;text-align:left;vertical-align:top}th,.file{white-space:nowrap}"
               ".note{color:#57606a}")
INDEX_CSP = ("default-src 'none'; style-src 'sha256-"
             f"{base64.b64encode(hashlib.sha256(INDEX_STYLE.encode()).digest()).decode()}'; {FRAMING}")
PAGE_DAYS = 31  # days an index page shows: a month, ~800 keys, one S3 listing
PAGE_PARAMS = frozenset({"before"})
INDEX_PATHS = frozenset({"/reports", "/reports/"})
DOWNLOADED = {".csv", ".md"}  # saved under a name with the day: the same tables of other days do not collide


@dataclass(frozen=True)
class IndexPage:
    days: list[ReportDay]  # up to PAGE_DAYS, newest first
    latest: date | None  # the newest complete day of all, not only of the page
    older: date | None  # the `before` of the next page, when there are older days


def page_params(path: str) -> frozenset[str]:
    """The parameters a path under `/reports` takes: the index's `before`, nothing else."""
    return PAGE_PARAMS if path in INDEX_PATHS else frozenset()


class Reports:
    def __init__(self, config: Config, unpathed: Unpathed):
        self.store = report_store(default_out(config), config.report)
        self.unpathed = unpathed  # a 404 names no folder of the server's
        self.daily_at = config.service.daily_at

    # ---- JSON --------------------------------------------------------------------------

    def index_json(self, query) -> Response:
        """`/api/v1/reports`: where the reports are, the newest complete day, a page of days
        with their files and the address of the older ones."""
        try:
            shown = self.index_page(query)
        except ReportNotFound as exc:
            return self.unpathed.refusal(404, exc, "/api/v1/reports", where="report.out")
        return json_response(200, {
            "location": self.unpathed(self.store.where), "latest": shown.latest and shown.latest.isoformat(),
            "days": [{"day": d.day.isoformat(), "complete": d.complete,
                      "files": [{"name": f.name, "bytes": f.size, "modified": iso_utc(f.modified),
                                 "url": f"/reports/{d.day.isoformat()}/{f.name}"} for f in d.files]}
                     for d in shown.days],
            "older": shown.older and f"/api/v1/reports?before={shown.older.isoformat()}",
        })

    def index_page(self, query) -> IndexPage:
        """The days before `?before=` (all when absent), the newest PAGE_DAYS of them with their files."""
        before = (query.get("before") or [None])[0]
        until = report_day(before) if before is not None else date.max
        if until is None:
            raise UsageError(f"before={before[:40]!r} is not a day", where="before",
                             hint="use YYYY-MM-DD, as the index's link to older days does")
        every = self.store.dates()
        dates = [day for day in every if day < until]
        days = self.store.days(dates[:PAGE_DAYS])
        return IndexPage(days, self.latest_day(every, days), dates[PAGE_DAYS - 1] if len(dates) > PAGE_DAYS else None)

    def latest_day(self, dates: Sequence[date], listed: Sequence[ReportDay] = ()) -> date | None:
        """The newest complete day: the days are looked at newest first (those `listed` already
        known) and the walk stops at the first complete one."""
        known = {d.day: d.complete for d in listed}
        return next((day for day in dates if (known[day] if day in known else self.store.complete(day))), None)

    # ---- pages -------------------------------------------------------------------------

    def page(self, path: str, query) -> Response:
        """Everything under `/reports`: nothing but a real date and a report file name is
        looked up (`..`, `%2e`, `\\`, NUL or an encoded slash is no day and no file name)."""
        parts = path.split("/")[2:]  # "/reports/a/b" -> ["a", "b"]
        try:
            if not parts:  # `/reports?before=`: the page asked for, not the newest
                return redirect("reports/" + (f"?{urlencode(query, doseq=True)}" if query else ""))
            if parts == [""]:
                return self.index_html(query)
            if parts[0] == "latest" and len(parts) <= 2:
                return self.latest(parts[1:])
            day = report_day(parts[0])
            if day is not None and len(parts) == 1:
                return redirect(f"{parts[0]}/{LAST}")
            if day is not None and parts[1:] == [""]:
                return redirect(LAST)
            if day is not None and len(parts) == 2 and FILE_NAME.fullmatch(parts[1]):
                return self.file(day, parts[1])
        except ReportNotFound as exc:
            return self.unpathed.refusal(404, exc, path, where=path, hint="see /reports/ for the days there are")
        return error_response(404, "not a report: /reports/<YYYY-MM-DD>/<file>, where <file> is report.html, "
                                   "report.json, summary.md or a table's CSV", where=path, hint="see /reports/")

    def latest(self, rest: Sequence[str]) -> Response:
        newest = self.latest_day(self.store.dates())
        if newest is None:
            raise ReportNotFound(f"no complete report yet in {self.store.where}: the service writes the day "
                                 f"before's at {self.daily_at} UTC (or run `spendlake report`)")
        name = rest[0] if rest and rest[0] else LAST
        if not FILE_NAME.fullmatch(name):
            raise ReportNotFound(f"{name!r} is not a report file")
        # relative, so the service may sit behind a proxy under another path
        return redirect(f"{'../' if rest else ''}{newest.isoformat()}/{name}")

    def file(self, day: date, name: str) -> Response:
        opened = self.store.open(day, name)
        suffix = PurePosixPath(name).suffix
        headers = {"ETag": opened.etag, "Cache-Control": "private, no-cache"}
        if modified := opened.last_modified:  # none within the file's own second (report_store.OpenedFile)
            headers["Last-Modified"] = modified
        if name == LAST:
            headers["Content-Security-Policy"] = REPORT_CSP
        if suffix in DOWNLOADED:
            headers["Content-Disposition"] = f'attachment; filename="spendlake-{day.isoformat()}-{name}"'
        return Response(200, b"", CONTENT_TYPES[suffix], headers, stream=opened.stream)

    def index_html(self, query) -> Response:
        shown = self.index_page(query)
        newest = shown.latest
        head = (f'<p>Newest complete: <a href="{newest.isoformat()}/{LAST}">{newest.isoformat()}</a> '
                f'(always at <a href="latest/">latest/</a>).</p>' if newest else
                f'<p class="note">No complete report yet. The service writes the day before\'s at '
                f'{escape(self.daily_at)} UTC; <code>spendlake report</code> writes one now.</p>')
        rows = "".join(day_row(d) for d in shown.days)
        table = (f"<table><thead><tr><th>day</th><th>report</th><th>data</th></tr></thead><tbody>\n{rows}"
                 "</tbody></table>" if shown.days else "")
        links = ((['<a href="./">newest days</a>'] if "before" in query else [])
                 + ([f'<a href="?before={shown.older.isoformat()}">older days</a>'] if shown.older else []))
        nav = f"<p>{' '.join(links)}</p>\n" if links else ""
        page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f"<title>spendlake daily reports</title><style>{INDEX_STYLE}</style></head><body>\n"
                f"<h1>spendlake daily reports</h1>\n<p class=\"note\">From {escape(self.unpathed(self.store.where))}. "
                f"All days UTC, newest first.</p>\n{head}\n{table}\n{nav}</body></html>\n")
        return Response(200, page.encode(), CONTENT_TYPES[".html"], {"Content-Security-Policy": INDEX_CSP})


def day_row(day: ReportDay) -> str:
    name = day.day.isoformat()
    if not day.complete:
        return (f'<tr><th>{name}</th><td class="note">being written ({LAST} is written last), '
                "or its run failed</td><td></td></tr>\n")
    data = ", ".join(f'<span class="file"><a href="{escape(name)}/{escape(f.name)}">{escape(f.name)}</a> '
                     f"({size(f.size)})</span>" for f in day.files if f.name != LAST)
    return f'<tr><th>{name}</th><td><a href="{name}/{LAST}">{LAST}</a></td><td>{data}</td></tr>\n'


def redirect(location: str) -> Response:
    return json_response(302, {"location": location}, Location=location)


def size(count: int) -> str:
    if count < 1024:
        return f"{count:,} bytes"
    kib = count / 1024
    return f"{kib:,.1f} KiB" if kib < 1024 else f"{kib / 1024:,.1f} MiB"
