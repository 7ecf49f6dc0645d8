"""GET a JSON document over HTTP with retries (urllib3's Retry): the job sources' client for
slurmrestd and Prometheus.

Connection errors, read timeouts and 429/500/502/503/504 answers are retried with
exponential backoff up to `attempts` in all. A Retry-After is honoured up to `timeout`
seconds; a server asking for longer is an error at once (a day's wait would hold the source,
and `serve` with it). `timeout` bounds each attempt's whole answer, not only each read. Errors become a
SourceError naming the URL (without its query) and the next step. Request headers (tokens)
never appear in an error or a log line: urllib3 logs the method and path only.

The query is percent-encoded as RFC 3986 says (a space is %20, `/` is %2F): the form SigV4
signs, which `sign` (a request's URL → the headers that sign it) is given. Each attempt is
signed anew: a signature is dated, and a retry minutes later with the first attempt's headers
would be refused as expired. urllib3 makes one attempt (following up to REDIRECTS redirects,
however many attempts there are; none of the headers given here go on to another host: a
token is for the server it was configured for); its Retry policy decides and times the next.

A URL's `user:password@` is sent as HTTP Basic auth (percent-decoded, UTF-8 as RFC 7617
says) and taken out of the URL before urllib3 sees it: urllib3 would drop it without a word,
and neither the request line nor its log shows it. An answer nested too deeply to parse
is an answer that is not JSON.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

from service.core import json_text
from service.core.errors import SourceError
from service.core.logs import hide

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_SECONDS = 0.5  # the first retry waits this long, each next one twice as long
MAX_BODY_BYTES = 512 * 1024 * 1024  # a job listing larger than this is not an answer we can hold
CHUNK_BYTES = 1 << 16
REDIRECTS = 5  # followed within one attempt, whatever max_attempts is


def get_json(url: str, *, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
             timeout: float = 30, attempts: int = 5, hint: str = "check the URL",
             status_hints: dict[int, str] | None = None, sign: Callable[[str], dict[str, str]] | None = None) -> Any:
    """The decoded JSON body of GET `url`?`params`; SourceError when it cannot be had, with
    `status_hints`' hint for an HTTP status it names (else `hint`)."""
    import urllib3
    from urllib3.util import Retry, Timeout

    url, auth = _basic_auth(url)
    where = _without_query(url)
    policy = Retry(total=attempts - 1, connect=attempts - 1, read=attempts - 1, status=attempts - 1, other=0,
                   allowed_methods={"GET"}, status_forcelist=RETRY_STATUSES, backoff_factor=BACKOFF_SECONDS,
                   respect_retry_after_header=True)
    target = f"{url}?{urlencode(params, quote_via=quote, safe='')}" if params else url
    try:
        with urllib3.PoolManager(timeout=Timeout(total=timeout)) as pool:
            while True:
                sent = {**(headers or {}), **auth, **(sign(target) if sign else {})}
                deadline = time.monotonic() + timeout
                try:
                    response = pool.request("GET", target, preload_content=False, headers=sent,
                                            retries=_one_attempt(Retry, sent))
                except urllib3.exceptions.MaxRetryError as exc:
                    if isinstance(exc.reason, urllib3.exceptions.ResponseError) and "redirect" in str(exc.reason):
                        raise SourceError(f"redirected more than {REDIRECTS} times (a loop?)", where=where,
                                          hint=f"{hint}, or give the URL the redirects end at") from None
                    policy = policy.increment("GET", target, error=exc.reason)  # MaxRetryError when spent
                    policy.sleep()
                    continue
                if not policy.is_retry("GET", response.status, bool(response.headers.get("Retry-After"))):
                    break
                try:
                    policy = policy.increment("GET", target, response=response)
                except urllib3.exceptions.MaxRetryError:
                    break  # the last answer is the one reported
                _read(response, deadline, timeout, where)
                response.release_conn()
                _wait(policy, response, timeout, where)
            try:
                body = _read(response, deadline, timeout, where)
            finally:
                response.release_conn()
    except urllib3.exceptions.MaxRetryError as exc:
        reason = exc.reason or exc
        raise SourceError(f"cannot reach it after {attempts} attempt(s): {_reason(reason)}", where=where,
                          hint=f"{hint}, or raise max_attempts / timeout_seconds") from None
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


def _one_attempt(retry: type, sent: dict[str, str]) -> Any:
    """urllib3's policy for one attempt: redirects followed (a few, however many attempts there
    are), and none of the headers given here sent on to another host (tokens, signatures)."""
    return retry(total=None, connect=0, read=0, status=0, other=0, redirect=REDIRECTS, allowed_methods={"GET"},
                 status_forcelist=RETRY_STATUSES, raise_on_status=False, raise_on_redirect=True,
                 remove_headers_on_redirect=retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT | set(sent))


def _read(response: Any, deadline: float, timeout: float, where: str) -> bytes:
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
            raise SourceError(f"the server was too slow: {size} bytes of its answer came in {timeout:g} s "
                              "(timeout_seconds), and more were still to come", where=where,
                              hint="raise timeout_seconds, or read a shorter window (lookback_hours)") from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise SourceError(f"the answer is larger than {MAX_BODY_BYTES >> 20} MB", where=where,
                              hint="read a shorter window (lookback_hours)")


def _wait(policy: Any, response: Any, timeout: float, where: str) -> None:
    """Sleep before the next attempt: the backoff, or the server's Retry-After if no longer than
    `timeout` (a server asking for a day would hold the source, and `serve`, that long)."""
    text = (response.headers.get("Retry-After") or "").strip()
    # urllib3 caps the seconds it reads at 6 hours: the error says what the server asked
    asked = float(text) if text.isdigit() else policy.get_retry_after(response) if text else None
    if asked is not None and asked > timeout:
        raise SourceError(f"answered HTTP {response.status} asking to wait {asked:g} s before trying again "
                          f"(Retry-After), longer than timeout_seconds ({timeout:g} s)", where=where,
                          hint="run later, when the server takes requests again")
    policy.sleep(response)


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


def _basic_auth(url: str) -> tuple[str, dict[str, str]]:
    """`url` without its userinfo, and the Authorization header that carries it instead."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, {}
    user, _, password = userinfo.partition(":")
    hide(unquote(password))  # a server may echo it in an error
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}


def _without_query(url: str) -> str:
    """The URL as errors name it: no query (it may carry a token), the host as written (an IPv6
    one in its brackets)."""
    return urlunsplit(urlsplit(url)._replace(query="", fragment=""))


def _reason(exc: BaseException) -> str:
    text = str(exc)
    # urllib3 wraps the cause in "<urllib3.connection.HTTPConnection object at 0x..>: ..." text
    return text.split(">: ", 1)[-1] if ">: " in text else text
