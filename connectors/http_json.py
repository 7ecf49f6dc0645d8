"""GET a JSON document over HTTP with retries (urllib3's Retry): the job sources' client for
slurmrestd and Prometheus.

Connection errors, read timeouts and 429/500/502/503/504 answers are retried with
exponential backoff up to `attempts` in all. A Retry-After (on any of them, and on a 413) is
honoured up to `timeout` seconds; a server asking for longer is an error at once naming the
wait it asked (a day's wait would hold the source, and `serve` with it). `timeout` bounds each
attempt: its redirects' hops together, each hop's status line and headers (connectors/
http_deadline.py: urllib3 bounds only each read of them) and its whole answer: a server that
takes the connection but has not answered by then is said too slow (its attempts retried), as one
whose answer stops coming is (not retried), and only a connection not had is one it 'cannot reach'.
A source may set one `Deadline` over all its requests (gpu-metrics' deadline_seconds): no attempt
or wait between attempts starts past it, and an attempt is given what is left of it when that is
less than `timeout`. An answer too slow or too large names what asks for a smaller one (`smaller`).
Errors become a SourceError naming the URL (without its query), the source's settings by their config path
(`config_path`, e.g. `inventory[0]`) and the next step. Request headers (tokens) never appear
in an error or a log line: urllib3 logs the method and path only.

The query is percent-encoded as RFC 3986 says (a space is %20, `/` is %2F): the form SigV4
signs, which `sign` (a request's URL → the headers that sign it) is given. Each attempt is
signed anew: a signature is dated, and a retry minutes later with the first attempt's headers
would be refused as expired. An attempt follows up to REDIRECTS redirects, however many
attempts there are, each hop given what is left of the attempt's timeout (urllib3 would give
each a fresh one); none of the headers given here go on to another host: a token is for the
server it was configured for. urllib3's Retry policy decides and times the next attempt.

A URL's `user:password@` is sent as HTTP Basic auth (percent-decoded, UTF-8 as RFC 7617
says) and taken out of the URL before urllib3 sees it: urllib3 would drop it without a word,
and neither the request line nor its log shows it. An answer nested too deeply to parse
is an answer that is not JSON.
"""

from __future__ import annotations

import base64
import email.utils
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, urlencode, urljoin, urlsplit, urlunsplit

from connectors.http_deadline import bounded
from service.core import json_text
from service.core.deadline import Deadline, DeadlinePassed
from service.core.errors import SourceError
from service.core.logs import hide

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_SECONDS = 0.5  # the first retry waits this long, each next one twice as long
MAX_BODY_BYTES = 512 * 1024 * 1024  # a job listing larger than this is not an answer we can hold
CHUNK_BYTES = 1 << 16
REDIRECTS = 5  # followed within one attempt, whatever max_attempts is


def get_json(url: str, *, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
             timeout: float = 30, attempts: int = 5, hint: str = "check the URL",
             status_hints: dict[int, str] | None = None, sign: Callable[[str], dict[str, str]] | None = None,
             config_path: str = "", smaller: str | None = None, deadline: Deadline | None = None) -> Any:
    """The decoded JSON body of GET `url`?`params`; SourceError when it cannot be had, with
    `status_hints`' hint for an HTTP status it names (else `hint`). `config_path` is the source's
    (`inventory[0]`): its timeout_seconds and max_attempts are named under it. `smaller`: what asks
    for a smaller answer, told beside raising the timeout when one came too slowly or too large
    (default: a shorter window, the source's lookback_hours; slurmrestd's OpenAPI document has none).
    `deadline`: the source's, over all its requests: an attempt is given what is left of it when that
    is less than `timeout`, and no attempt or wait starts past it (a SourceError naming its setting)."""
    import urllib3
    from urllib3.util import Retry

    url, auth = _basic_auth(url)
    where = _without_query(url)
    settings = f"{config_path}." if config_path else ""
    policy = Retry(total=attempts - 1, connect=attempts - 1, read=attempts - 1, status=attempts - 1, other=0,
                   allowed_methods={"GET"}, status_forcelist=RETRY_STATUSES, backoff_factor=BACKOFF_SECONDS,
                   respect_retry_after_header=True)
    joined = "&" if urlsplit(url).query else "?"  # a configured URL's own query (`?tenant=a`) kept
    target = f"{url}{joined}{urlencode(params, quote_via=quote, safe='')}" if params else url
    limit = _Limit(timeout, where, settings, smaller or f"read a shorter window ({settings}lookback_hours)", deadline)
    try:
        with bounded(urllib3.PoolManager()) as pool:
            while True:
                sent = {**(headers or {}), **auth, **(sign(target) if sign else {})}
                ends = limit.attempt_end()
                try:
                    response = _follow(pool, target, sent, ends, limit, hint)
                except urllib3.exceptions.MaxRetryError as exc:
                    policy = policy.increment("GET", target, error=exc.reason)  # MaxRetryError when spent
                    limit.may_wait(policy.get_backoff_time())
                    policy.sleep()
                    continue
                if not policy.is_retry("GET", response.status, bool(response.headers.get("Retry-After"))):
                    break
                try:
                    policy = policy.increment("GET", target, response=response)
                except urllib3.exceptions.MaxRetryError:
                    break  # the last answer is the one reported
                _read(response, ends, limit)
                response.release_conn()
                _wait(policy, response, limit)
            try:
                body = _read(response, ends, limit)
            finally:
                response.release_conn()
    except urllib3.exceptions.MaxRetryError as exc:
        reason = exc.reason or exc
        if isinstance(reason, urllib3.exceptions.ReadTimeoutError):
            raise limit.no_answer(attempts) from None
        if limit.capped and isinstance(reason, urllib3.exceptions.ConnectTimeoutError):
            raise limit.overdue() from None  # the deadline cut the connect: raising timeout_seconds would not do
        raise SourceError(f"cannot reach it after {attempts} attempt(s): {_reason(reason)}", where=where,
                          hint=f"{hint}, or raise {settings}max_attempts / {settings}timeout_seconds") from None
    except urllib3.exceptions.HTTPError as exc:
        raise SourceError(f"HTTP request failed: {_reason(exc)}", where=where, hint=hint) from None
    if response.status >= 400:
        detail = _detail(body)
        tried = f" after {attempts} attempts" if response.status in RETRY_STATUSES and attempts > 1 else ""
        raise SourceError(f"answered HTTP {response.status}{tried}: {detail}", where=where,
                          hint=(status_hints or {}).get(response.status, hint))
    try:
        return json_text.loads(body)
    except ValueError as exc:
        raise SourceError(f"the answer is not JSON ({exc}): {body[:120]!r}", where=where, hint=hint) from None


class _Limit:
    """An attempt's bound as errors name it: `timeout` seconds, the source's timeout_seconds, or what
    is left of the source's `deadline` when that is sooner (`capped`: the deadline is then what is named)."""

    def __init__(self, timeout: float, where: str, settings: str, smaller: str, deadline: Deadline | None = None):
        self.timeout, self.where, self.setting, self.smaller = timeout, where, f"{settings}timeout_seconds", smaller
        self.deadline, self.capped = deadline, False

    def attempt_end(self) -> float:
        """When the next attempt must be answered by; the deadline's error when it has passed."""
        now = time.monotonic()
        ends = now + self.timeout
        self.capped = self.deadline is not None and self.deadline.at < ends
        if self.deadline is not None and self.capped:
            if self.deadline.at <= now:
                raise self.overdue()
            ends = self.deadline.at
        return ends

    def may_wait(self, seconds: float) -> None:
        """The deadline's error when waiting `seconds` before the next attempt would pass it."""
        if self.deadline is not None and time.monotonic() + seconds >= self.deadline.at:
            raise self.overdue()

    def overdue(self) -> DeadlinePassed:
        assert self.deadline is not None
        return self.deadline.overdue(self.where, self.smaller)

    def too_slow(self, size: int) -> SourceError:
        if self.capped:
            return self.overdue()
        return SourceError(f"the server was too slow: {size} bytes of its answer came in {self.timeout:g} s "
                           f"({self.setting}), and more were still to come", where=self.where, hint=self._hint)

    def no_answer(self, attempts: int) -> SourceError:
        """The server took the connection but its status line and headers did not all come in time
        (urllib3's read timeout, or http_deadline's cut): slow, not unreachable."""
        if self.capped:
            return self.overdue()
        each = f", in each of {attempts} attempts" if attempts > 1 else ""
        return SourceError(f"the server was too slow: it took the connection, but its answer's status line and "
                           f"headers had not come in {self.timeout:g} s ({self.setting}){each}", where=self.where,
                           hint=self._hint)

    @property
    def _hint(self) -> str:
        return f"raise {self.setting}, or {self.smaller}"


def _follow(pool: Any, url: str, sent: dict[str, str], deadline: float, limit: _Limit, hint: str) -> Any:
    """One attempt's answer to GET `url`, its redirects followed (up to REDIRECTS), every hop
    within `deadline`; past another host, none of the headers given here are sent (tokens,
    signatures). urllib3's MaxRetryError when a hop cannot be had (the attempt is retried)."""
    from urllib3.util import Retry, Timeout

    for _ in range(REDIRECTS + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise limit.too_slow(0)
        response = pool.request("GET", url, preload_content=False, headers=sent, redirect=False,
                                retries=Retry(total=None, connect=0, read=0, status=0, other=0, redirect=0,
                                              raise_on_status=False, raise_on_redirect=False),
                                timeout=Timeout(total=left))
        location = response.get_redirect_location()
        if not location:
            return response
        _read(response, deadline, limit)
        response.release_conn()
        following = urljoin(url, location)
        if not pool.connection_from_url(url).is_same_host(following):
            sent = {}
        url = following
    raise SourceError(f"redirected more than {REDIRECTS} times (a loop?)", where=limit.where,
                      hint=f"{hint}, or give the URL the redirects end at")


def _read(response: Any, deadline: float, limit: _Limit) -> bytes:
    """The answer's body by `deadline`: urllib3's timeout bounds each read, which a server sending
    a few bytes a second never trips, so each chunk's read waits only what is left (a slow answer
    is given up, not retried: a slow server stays slow)."""
    from urllib3.exceptions import ReadTimeoutError

    chunks, size = [], 0
    while True:
        left = deadline - time.monotonic()
        sock = getattr(response.connection, "sock", None)
        try:
            if left <= 0:
                raise ReadTimeoutError(None, None, "past the deadline")  # type: ignore[arg-type]
            if sock is not None:
                sock.settimeout(left)  # urllib3 sets it anew for the connection's next request
            chunk = response.read1(CHUNK_BYTES)
        except ReadTimeoutError:
            raise limit.too_slow(size) from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise SourceError(f"the answer is larger than {MAX_BODY_BYTES >> 20} MB", where=limit.where,
                              hint=limit.smaller)


def _wait(policy: Any, response: Any, limit: _Limit) -> None:
    """Sleep before the next attempt: the backoff, or the server's Retry-After if no longer than
    the timeout (a server asking for a day would hold the source, and `serve`, that long)."""
    text = response.headers.get("Retry-After") or ""
    asked = _asked(text)
    if asked is not None and asked > limit.timeout:
        seconds = f"{asked:g}" if asked < 1e5 else f"{asked:.0f}"  # not 2.30586e+09
        until = "" if text.strip().isdigit() else f" (until {text.strip()})"
        raise SourceError(f"answered HTTP {response.status} asking to wait {seconds} s{until} before trying again "
                          f"(Retry-After), longer than {limit.setting} ({limit.timeout:g} s)", where=limit.where,
                          hint="run later, when the server takes requests again")
    limit.may_wait(asked if asked is not None else policy.get_backoff_time())
    policy.sleep(response)


def _asked(text: str) -> float | None:
    """The seconds a Retry-After asks for, seconds or an HTTP date, as the server wrote them
    (urllib3 caps what it reads at 6 hours); None when there is none or it is not one."""
    text = text.strip()
    if text.isdigit():
        return float(text)
    parsed = email.utils.parsedate_tz(text)
    return None if parsed is None else max(0.0, email.utils.mktime_tz(parsed) - time.time())


def _detail(body: bytes) -> str:
    """What an error answer says: a JSON body's `errors` (slurmrestd puts them after a long
    `meta` block, past any prefix shown), `error` (Prometheus) or `message` (AWS: Amazon Managed
    Service for Prometheus), else the body's start."""
    try:
        data = json_text.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        errors = data.get("errors")
        texts = [str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e)
                 for e in errors] if isinstance(errors, list) else []
        if not texts:
            texts = [data[key] for key in ("error", "message") if isinstance(data.get(key), str)][:1]
        if texts:
            return "; ".join(texts)[:300]
    return body[:300].decode(errors="replace").strip()


def under(base: str, path: str) -> str:
    """`base` (a configured URL) with `path` appended to its path, its query kept after it and
    its fragment (never sent) dropped: `http://h/slurm?tenant=a` + `/slurmdb/v0.0.40/jobs` is
    `http://h/slurm/slurmdb/v0.0.40/jobs?tenant=a`, where joining the text put the path in the query."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, fragment=""))


def _basic_auth(url: str) -> tuple[str, dict[str, str]]:
    """`url` without its userinfo, and the Authorization header that carries it instead."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, {}
    user, _, password = userinfo.partition(":")
    hide(unquote(password))  # a server may echo it in an error
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    hide(token)  # or echo the header it was sent, its value split from `Basic` (logs.BASIC takes it whole)
    return urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}


def _without_query(url: str) -> str:
    """The URL as errors name it: no query (it may carry a token), the host as written (an IPv6
    one in its brackets)."""
    return urlunsplit(urlsplit(url)._replace(query="", fragment=""))


def _reason(exc: BaseException) -> str:
    text = str(exc)
    # urllib3 wraps the cause in "<urllib3.connection.HTTPConnection object at 0x..>: ..." text
    return text.split(">: ", 1)[-1] if ">: " in text else text
