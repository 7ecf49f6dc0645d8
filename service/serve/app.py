"""HTTP: `/metrics`, `/healthz`, `/readyz`, a read-only JSON API under `/api/v1` and the
daily reports under `/reports/` (service/serve/reports.py).

Standard library `ThreadingHTTPServer`; one small routing table. Every error is JSON with a
message; unknown query parameters are a 400 that lists the accepted ones. When a token is set
(config `service.api_token` or `$SPENDLAKE_API_TOKEN`), `/api` and `/reports` require it, as a
bearer token or as the password of HTTP Basic (any user name: what a browser's login prompt
sends, so finance can open a report); `/metrics` and the probes stay open so Prometheus and
the orchestrator need no secret.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import duckdb
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from service.attribution import RollupsKept, kept_in
from service.core.config import Config
from service.core.errors import ConfigError, DataError, LakeBusyError, ResourceError, SpendlakeError, UsageError
from service.core.lake import Lake
from service.core.lake_file_errors import damaged_lake_file
from service.core.coverage import data_end
from service.core.timewindow import iso_utc, utc_now
from service.ingest.freshness import source_freshness
from service.core.lake_damage import unnamed_damage
from service.serve.hosts import Hosts
from service.serve.http import Response, error_response, json_response
from service.serve.reports import PAGE_PARAMS, Reports, page_params
from service.serve.unpathed import Unpathed
from service.ingest.status import ahead_lines, lake_notes, orphan_lines, status as lake_status, with_notes

log = logging.getLogger(__name__)

TOKEN_ENV = "SPENDLAKE_API_TOKEN"
RUNS_PARAMS = frozenset({"since", "until", "by", "state", "top", "cost", "run"})
COMMITMENTS_PARAMS = frozenset({"since", "until", "by"})
ATTRIBUTE_PARAMS = frozenset({"since", "until", "by", "where", "cost", "granularity", "top", "compare", "explain"})
FINDING_STATUSES = ("open", "acknowledged", "resolved", "all")
# a blank one is a 400, not the default: `since=$SINCE` with SINCE unset, as the CLI's empty --since
TIME_PARAMS = frozenset({"since", "until", "as_of"})


Query = dict[str, list[str]]


@dataclass(frozen=True)
class Route:
    handler: Callable[[Query], Response]
    params: frozenset[str] = frozenset()
    repeatable: frozenset[str] = frozenset()
    protected: bool = False
    detailed: bool = False  # the handler takes `authorized` and says more to a token holder (to all with none set)
    heavy: bool = False  # a query of the lake whose answer may be megabytes: a few at a time (listener.QUERY_SLOTS)
    challenge: str = 'Bearer realm="spendlake"'  # a 401's WWW-Authenticate


REPORTS_CHALLENGE = 'Basic realm="spendlake reports", charset="UTF-8"'  # a browser asks for the token


def api_token(config: Config) -> str | None:
    """The bearer token: `$SPENDLAKE_API_TOKEN`, else `service.api_token`; either must be at
    least 16 characters (a short token is a config error, not a weak lock). Whitespace around it
    goes: a Secret made from a file ends in a newline no client sends (they would all get a 401)."""
    token = os.environ.get(TOKEN_ENV)
    token = token.strip() if token is not None else None
    if token is not None and len(token) < 16:
        raise ConfigError(f"${TOKEN_ENV} is {len(token)} characters; it must be at least 16", where=f"${TOKEN_ENV}",
                          hint="set a longer random token, e.g. `openssl rand -hex 24`")
    token = token or (config.service.api_token or "").strip() or None
    if token is None and config.service.metrics_auth == "token":
        raise ConfigError("is token, but no token is set for /metrics to need", where="service.metrics_auth",
                          hint=f"set service.api_token or ${TOKEN_ENV}, or service.metrics_auth: open")
    return token


# A control character but tab and line feed (which prometheus_client writes as `\\n`): only a
# label value (a tag's, a job name's) holds one in a scrape, where it went raw (a NUL)
METRIC_CONTROLS = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")


def without_controls(scrape: bytes) -> bytes:
    """The exposition text with each control character in a label value written as an escape
    (`\\x00`: a backslash, escaped as the format wants, and the character's code)."""
    return METRIC_CONTROLS.sub(lambda found: b"\\\\x%02x" % found[0][0], scrape)


class Api:
    """The routes, as plain functions of the query; `ServiceHandler` does the HTTP."""

    def __init__(self, config: Config, registry: CollectorRegistry, *, token: str | None = None,
                 clock: Callable[[], datetime] = utc_now, listen: str | None = None):
        self.config = config
        self.hosts = Hosts.of(listen or config.service.listen, config.service.allowed_hosts)
        self.lake = Lake.of(config)
        self.registry = registry
        self.token = token
        self.clock = clock
        self.unpathed = Unpathed.of(config, self.lake.root)  # what a client is told of the server's folders
        self.reports = Reports(config, self.unpathed)
        self.rollups = RollupsKept()
        self.routes: dict[str, Route] = {
            "/metrics": Route(self.metrics, protected=config.service.metrics_auth == "token"),
            "/healthz": Route(self.healthz),
            "/readyz": Route(self.readyz, detailed=True),
            "/api/v1/status": Route(self.status, protected=True),
            "/api/v1/attribute": Route(self.attribute, ATTRIBUTE_PARAMS, repeatable=frozenset({"where"}),
                                       protected=True, heavy=True),
            "/api/v1/runs": Route(self.runs, RUNS_PARAMS, protected=True, heavy=True),
            "/api/v1/findings": Route(self.findings, frozenset({"rule", "team", "status", "category"}), protected=True,
                                      heavy=True),
            "/api/v1/reports": Route(self.reports.index_json, PAGE_PARAMS, protected=True),
            "/api/v1/plans": Route(self.plans, frozenset({"as_of"}), protected=True, heavy=True),
            "/api/v1/budgets": Route(self.budgets, protected=True, heavy=True),
            "/api/v1/commitments": Route(self.commitments, COMMITMENTS_PARAMS, protected=True, heavy=True),
        }

    def route(self, path: str) -> Route | None:
        if path == "/reports" or path.startswith("/reports/"):  # a day and a file: reports.py checks them
            return Route(partial(self.reports.page, path), page_params(path), protected=True,
                         challenge=REPORTS_CHALLENGE)
        return self.routes.get(path.rstrip("/") or "/")

    def handle(self, path: str, query: Query, authorization: str | None, host: str | None = None) -> Response:
        route = self.route(path)
        refusal = self.refused(path, route, authorization, host)
        return refusal if refusal is not None else self.answer(path, route, query, authorization)

    def refused(self, path: str, route: Route | None, authorization: str | None, host: str | None) -> Response | None:
        """The answer to a request refused for its Host, path or token (421, 404, 401), before anything
        about its parameters; None for one let in. The HTTP handler asks it before a heavy route's
        query slot: a refusal waits for no query."""
        # a token is what a rebinding page lacks, on the routes it guards: /metrics open beside a token is not
        if not (self.token and route is not None and route.protected) and not self.hosts.allows(host):
            return self.hosts.refusal(host)
        if route is None:
            return error_response(404, f"no such endpoint {path!r}",
                                  hint="see " + ", ".join(sorted([*self.routes, "/reports/"])))
        if route.protected and not self.authorized(authorization):
            return error_response(401, "missing or wrong token", where=path,
                                  hint=f"send 'Authorization: Bearer <token>', or the token as the password of "
                                       f"HTTP Basic (service.api_token or ${TOKEN_ENV})",
                                  **{"WWW-Authenticate": route.challenge})
        return None

    def answer(self, path: str, route: Route, query: Query, authorization: str | None) -> Response:
        """The answer to a request `refused` let in."""
        unknown = sorted(set(query) - route.params)
        if unknown:
            accepted = ", ".join(sorted(route.params)) or "none"
            return error_response(400, f"unknown parameter(s): {', '.join(unknown)[:200]}", where=path,
                                  hint=f"accepted: {accepted}")
        repeated = sorted(k for k, v in query.items() if len(v) > 1 and k not in route.repeatable)
        if repeated:
            return error_response(400, f"parameter(s) given more than once: {', '.join(repeated)}", where=path)
        blank = sorted(k for k in TIME_PARAMS & set(query) if not query[k][0].strip())
        if blank:
            return error_response(400, f"{blank[0]} is empty, naming no day or time", where=blank[0],
                                  hint=f"leave {blank[0]} out for its default")
        try:
            with kept_in(self.rollups):  # a stale period rolled up for one request serves the next
                if route.detailed:
                    return route.handler(query, self.authorized(authorization))
                return route.handler(query)
        except UsageError as exc:
            return self.unpathed.refusal(400, exc, path)
        except LakeBusyError as exc:
            return self.unpathed.refusal(503, exc, path)
        except SpendlakeError as exc:  # unreadable data or a full disk is the server's condition, not a bug
            log.error("%s: %s", path, exc)
            status = 503 if isinstance(exc, (DataError, ResourceError)) else 500
            return self.unpathed.refusal(status, exc, path, logged=True)
        except duckdb.Error as exc:  # a lake file cut short or altered: named, not an anonymous 500
            damaged = damaged_lake_file(exc) or unnamed_damage(self.lake, exc)
            if damaged is None:
                raise
            log.error("%s: %s", path, damaged)
            return self.unpathed.refusal(503, damaged, path, logged=True)

    def authorized(self, header: str | None) -> bool:
        """`Bearer <token>`, or `Basic` with the token as the password (the user name is ignored); with
        no token set, everything is open to whoever reaches the port: /readyz's reasons too."""
        if not self.token:
            return True
        scheme, _, given = (header or "").partition(" ")
        if scheme.lower() == "basic":
            try:
                given = base64.b64decode(given.strip(), validate=True).decode().partition(":")[2]
            except (binascii.Error, UnicodeDecodeError):
                return False
        elif scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self.token.encode())

    # ---- routes --------------------------------------------------------------------------

    def metrics(self, query: Query) -> Response:
        return Response(200, without_controls(generate_latest(self.registry)), CONTENT_TYPE_LATEST)

    def healthz(self, query: Query) -> Response:
        return json_response(200, {"status": "ok"})

    def readyz(self, query: Query, authorized: bool = False) -> Response:
        """Ready or not, and which sources hold it back (never ingested, data older than the
        source's freshness_hours, or no successful ingest within them); the reasons (errors;
        the lake and sources' folders by name) only to a holder of the API token, when one is set."""
        reasons, waiting = [], []
        try:
            with self.lake.query(tables=("costs",)) as con:  # the bill: a damaged findings file fails its own API
                con.execute("SELECT count(*) FROM costs WHERE false").fetchall()
        except (SpendlakeError, duckdb.Error, OSError) as exc:
            reasons.append(f"the lake at {self.lake.root} is not readable: {exc}")
            waiting.append("lake")
        else:
            for row in source_freshness(self.config, self.lake, self.clock()):
                problem = row.problem()
                if problem:
                    reasons.append(problem)
                    waiting.append(row.source)
        if not reasons:
            return json_response(200, {"status": "ready"})
        body = {"status": "not ready", "not_ready": waiting}
        return json_response(503, {**body, "reasons": [self.unpathed(r) for r in reasons]} if authorized else body)

    def status(self, query: Query) -> Response:
        now = self.clock()
        return json_response(200, self.unpathed.throughout({  # its sources' errors, its jobs' and notes said so
            "now": iso_utc(now),
            "read_only": self.config.service.read_only,  # service.read_only: it schedules no job
            # the rows of `status --sources --format json` (its note rows are `lake_notes`)
            "sources": with_notes([row.to_json() for row in source_freshness(self.config, self.lake, now)], (), ()),
            "jobs": self.lake.read_state("jobs"),
            "periods": lake_status(self.lake),
            # `spendlake status`'s `ahead:` lines of the sources it counts, and a line per orphaned source
            "notes": ahead_lines(self.lake, now) + orphan_lines(self.lake),
            # its `copies:` and `derived:` lines, as its JSON's note rows: source, note_kind, note
            "lake_notes": [note.row(()) for note in lake_notes(self.lake)],
        }))


    def attribute(self, query: Query) -> Response:
        """The engine and JSON contract of `spendlake attribute --format json`; a lake without a bill of
        the configured sources is said first in `notes`, as the CLI says it on stderr (200: the answer is
        the CLI's, which exits 0; plans, which the CLI refuses, are a 503)."""
        from service.attribution import AttributionQuery, api_parameter, attribute_query, no_bill_note, with_notes

        parsed = AttributionQuery.parse(
            self.config, since=one(query, "since"), until=one(query, "until"), by=one(query, "by"),
            where=[value for value in query.get("where", []) if value], cost=one(query, "cost"),
            granularity=one(query, "granularity"), top=one(query, "top"), compare=flag(query, "compare"),
            explain=flag(query, "explain"),
            now=self.clock(), end=data_end(self.lake), naming=api_parameter)
        answer = attribute_query(self.lake, self.config, parsed, job_rules=True,  # the job rules on its connection
                                 naming=api_parameter)
        result = with_notes(self.lake, self.config, parsed, answer, naming=api_parameter)
        return json_response(200, self.unpathed.notes(noted(result.to_json(), no_bill_note(self.lake, result))))

    def runs(self, query: Query) -> Response:
        """The engine and JSON contract of `spendlake runs --format json`, with the note the CLI says on
        stderr first in `notes` (a run's story, asked with `run`, keeps its own after it)."""
        from service.attribution import (RunsQuery, api_parameter, no_bill_note, runs, runs_outside_the_data,
                                         runs_past_the_data)

        parsed = RunsQuery.parse(since=one(query, "since"), until=one(query, "until"), by=one(query, "by"),
                                 state=one(query, "state"), top=one(query, "top"), cost=one(query, "cost"),
                                 run=one(query, "run"), now=self.clock(), end=data_end(self.lake), naming=api_parameter)
        result = runs(self.lake, self.config, parsed)
        note = no_bill_note(self.lake, result) or runs_outside_the_data(self.lake, result) or runs_past_the_data(result)
        return json_response(200, self.unpathed.notes(noted(result.to_json(), note)))

    def findings(self, query: Query) -> Response:
        """The list `spendlake findings --format json` prints (open ones unless `status` says)."""
        from rules.base import CATEGORIES
        from service.findings.run import check_rule_names
        from service.findings.store import finding_rows, load_findings

        status = one(query, "status") or "open"
        if status not in FINDING_STATUSES:
            raise UsageError(f"unknown status {status!r}", where="status", hint=f"use one of {', '.join(FINDING_STATUSES)}")
        category = one(query, "category")
        if category is not None and category not in CATEGORIES:
            raise UsageError(f"unknown category {category!r}", where="category", hint=f"use one of {', '.join(CATEGORIES)}")
        if one(query, "rule"):
            check_rule_names([one(query, "rule")], where="rule")
        found = load_findings(self.lake, rule=one(query, "rule"), team=one(query, "team"),
                              status=None if status == "all" else status, category=category)
        return json_response(200, finding_rows(found))

    def plans(self, query: Query) -> Response:
        """The rows of `spendlake plans --format json` (the report's plans.csv), with the notes it
        prints beside them."""
        from service.report.sections.plans import plans_as_of
        from service.report.write import report_day

        found = plans_as_of(self.config, self.lake, report_day(one(query, "as_of"), now=self.clock(), lake=self.lake,
                                                            option="as_of"))
        return json_response(200, self.unpathed.notes(found.to_json()))

    def budgets(self, query: Query) -> Response:
        """`spendlake budgets --format json`'s rows, with the month, the moment judged and what it says beside them."""
        from service.findings.budgets import budgets_as_of

        return json_response(200, budgets_as_of(self.lake, self.config, self.clock()).to_json())

    def commitments(self, query: Query) -> Response:
        """The engine and JSON contract of `spendlake commitments --format json` (without `since`, its
        default window: COMMITMENTS_SINCE)."""
        from service.attribution import api_parameter, commitments_asked

        return json_response(200, commitments_asked(self.lake, self.config, one(query, "since"),
                                                    one(query, "until"), one(query, "by") or "", now=self.clock(),
                                                    naming=api_parameter).to_json())


def one(query: Query, name: str) -> str | None:
    """The parameter's value; left blank (`?team=&top=`, as a form or a URL template sends it), none."""
    values = query.get(name)
    return values[0] or None if values else None


def flag(query: Query, name: str) -> bool:
    value = (one(query, name) or "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise UsageError(f"{name} must be true or false, not {value!r}", where=name)
    return value in ("true", "1")


def noted(body: dict, note: str | None) -> dict:
    """An answer's JSON with `note` first in its `notes` (those it carries after it)."""
    return {**body, "notes": [note, *body.get("notes", ())]} if note else body
