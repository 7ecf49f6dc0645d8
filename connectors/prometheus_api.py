"""Prometheus's HTTP API `query_range`, through connectors/http_json.py (retries, errors that
name the URL). A long range is asked for in pieces of at most MAX_POINTS steps (Prometheus
refuses more than 11,000 points per series) and the pieces' samples are joined per series.
A piece over the server's `--query.max-samples` is asked for again in halves. An answer with
`warnings` (a partial response: a Thanos store or a remote-read endpoint that did not answer)
fails the query: a pod left out would put its GPUs' cost on idle without a word; Thanos is
asked not to answer partially at all (`partial_response=false`; Prometheus ignores it). An
answer that is no range query's matrix (the URL of a Loki, of a proxy's own API) fails saying so.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from connectors.aws_sigv4 import Signer
from connectors.http_json import get_json, under
from service.core.deadline import Deadline
from service.core.errors import SourceError

MAX_POINTS = 10_000
# what Prometheus (errTooManySamples) and Thanos/Mimir say of a query over their sample limit
TOO_MANY_SAMPLES = ("too many samples", "maximum number of samples")
NOT_PARTIAL = "PromQL info:"  # Prometheus 2.50-2.55 put its notes on a query among the warnings

Series = dict[str, Any]  # {"metric": {label: value}, "values": [(unix seconds, float), ...]}


def query_range(base_url: str, query: str, start: datetime, end: datetime, step_seconds: int, *,
                timeout: float, attempts: int, hint: str, access: tuple[Signer | None, str],
                config_path: str = "", deadline: Deadline | None = None) -> list[Series]:
    """Every series of `query` evaluated at start, start + step, ... <= end (UTC). `access`: the
    source's signer and what to do on a 403 (connectors/aws_sigv4.py `prometheus_access`);
    `config_path` the source's, under which errors name its timeout_seconds and max_attempts; `deadline`
    the source's over all its queries (http_json.Deadline), pieces and halves included."""
    sign, denied = access
    url = under(base_url, "/api/v1/query_range")
    merged: dict[tuple[tuple[str, str], ...], Series] = {}
    steps = MAX_POINTS
    first = start
    while first <= end:
        last = min(first + timedelta(seconds=step_seconds * steps), end)
        try:
            body = get_json(url, params={"query": query, "start": _unix(first), "end": _unix(last),
                                         "step": step_seconds, "partial_response": "false"},
                            timeout=timeout, attempts=attempts, hint=hint, status_hints={403: denied}, sign=sign,
                            config_path=config_path, deadline=deadline)
        except SourceError as exc:
            if not any(words in exc.message for words in TOO_MANY_SAMPLES):
                raise
            if last == first:
                exc.hint = "one step of this query is over it: raise Prometheus's --query.max-samples"
                raise
            steps //= 2  # the same piece again in halves, until one step
            continue
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else body
            raise SourceError(f"query failed: {error}", where=url, hint=hint)
        warnings = [str(w) for w in body.get("warnings") or () if not str(w).startswith(NOT_PARTIAL)]
        if warnings:
            raise SourceError(f"the answer may be partial: {'; '.join(warnings)[:300]}",
                              where=url, hint="ask again once every store behind this Prometheus answers")
        for metric, values in _matrix(body, url, hint):
            held = merged.setdefault(tuple(sorted(metric.items())), {"metric": metric, "values": []})
            held["values"].extend((t, v) for t, v in values if not math.isnan(v))
        first = last + timedelta(seconds=step_seconds)
    return list(merged.values())


def pieces(span: timedelta, step_seconds: int) -> int:
    """How many requests `query_range` makes for a range of `span` at `step_seconds` (none halved)."""
    return int(span.total_seconds() // (step_seconds * (MAX_POINTS + 1))) + 1


def _matrix(body: dict, url: str, hint: str) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """A range query's series: labels and (time, value) pairs. An answer of another shape (the URL
    of a Loki, of a proxy's own API) is a SourceError saying so, not a traceback."""
    data = body.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, list) or data.get("resultType") != "matrix":
        raise SourceError(f"the answer is not a Prometheus range query's matrix: {str(data)[:120]}",
                          where=url, hint=hint)
    series = []
    for item in result:
        try:
            metric, values = dict(item["metric"]), [(float(t), float(v)) for t, v in item["values"]]
        except (KeyError, TypeError, ValueError):
            raise SourceError(f"a series of the answer is not labels with [time, value] pairs: {str(item)[:120]}",
                              where=url, hint=hint) from None
        series.append((metric, values))
    return series


def _unix(moment: datetime) -> float:
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
