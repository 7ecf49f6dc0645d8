"""deadline_seconds of k8s-pods and slurm-jobs over slurmrestd: all of a run's requests, their attempts
and the waits between them, end by it (service/core/source_deadline.py), as gpu-metrics' Prometheus
queries do (tests/test_inventory_gpu.py): same key, same default rule, same message."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest
from prometheus_support import serving
from test_slurm_jobs_http import run as run_slurm
from test_slurm_jobs_http import slurmrestd  # noqa: F401 (the fixture)

from service.core.config import parse_config
from service.core.errors import ConfigError
from service.ingest.inventory import run_inventory

NOW = datetime(2026, 12, 2, 6, tzinfo=timezone.utc)


def said_the_deadline(error: object, url: str, seconds: str) -> bool:
    return (f"{url}: the source's requests were not all answered within {seconds} s (inventory[0].deadline_seconds), "
            "retries included — raise inventory[0].deadline_seconds") in str(error)


def test_a_prometheus_answering_each_query_slowly_ends_k8s_pods_by_its_deadline(tmp_path):
    """A Prometheus answering each query in 0.4 s, within timeout_seconds (1 s): a run's eleven queries (no GPU pod)
    took 4.4 s, and twenty of them 2 seconds each had no bound but the sum of their timeouts; they end by
    deadline_seconds (2 s), none asked past it."""
    asked: list[float] = []
    reported = {"metric": {}, "values": [[(NOW - timedelta(minutes=1)).timestamp(), str(NOW.timestamp())]]}

    def slowly(path: str, headers) -> tuple[int, bytes]:
        asked.append(time.monotonic())
        time.sleep(0.4)
        query = parse_qs(urlsplit(path).query)["query"][0]
        result = [reported] if query.startswith("max (timestamp(kube_pod_info))") else []
        return 200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()

    with serving(slowly) as url:
        config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
            {"name": "k8s", "kind": "k8s-pods", "prometheus_url": url, "timeout_seconds": 1, "deadline_seconds": 2}]})
        began = time.monotonic()
        [outcome] = run_inventory(config, now=NOW)
    assert said_the_deadline(outcome.error, f"{url}/api/v1/query_range", "2"), outcome.error
    # the slack is the shared host's load, not the deadline's: without it the run asked eleven times, 4.4 s
    assert 2 <= len(asked) < 11 and all(when - began < 3 for when in asked), (len(asked), asked)


@pytest.mark.parametrize("seconds, cut", [(0.7, "/slurmdb/v0.0.38/jobs"), (1.5, "/openapi/v3")])
def test_slurmrestd_answering_slowly_ends_slurm_jobs_by_its_deadline(tmp_path, slurmrestd, seconds, cut):  # noqa: F811
    """slurmrestd answering in 0.7 s, within timeout_seconds (1 s): the OpenAPI document then the jobs took 1.4 s,
    and a run had no bound but max_attempts x timeout_seconds for each; they end by deadline_seconds (1.2 s). A
    discovery the deadline cut (1.5 s: past the timeout, its attempts given what is left) says it, where the next
    document was asked past it ('cannot tell which ...')."""
    url, server = slurmrestd
    server.slow, server.slow_seconds = ("/openapi/v3", "/openapi", "/slurmdb/v0.0.38/jobs"), seconds
    began = time.monotonic()
    outcome = run_slurm(tmp_path, url, timeout_seconds=1, deadline_seconds=1.2, max_attempts=5)
    took = time.monotonic() - began
    assert said_the_deadline(outcome.error, url + cut, "1.2") and str(outcome.error).startswith(url + cut), \
        outcome.error
    assert took < 8 and all(p != "/openapi" for p, _, _ in server.requests), (took, server.requests)


@pytest.mark.parametrize("source, deadline", [
    ({"kind": "slurm-jobs", "url": "http://s:6820"}, 300),
    ({"kind": "slurm-jobs", "url": "http://s:6820", "timeout_seconds": 600}, 1800),  # two documents and the jobs
    ({"kind": "slurm-jobs", "url": "http://s:6820", "timeout_seconds": 600, "api_version": "v0.0.40"}, 600),
    ({"kind": "k8s-pods", "prometheus_url": "http://p:9090"}, 21 * 30),  # 17 pods' queries, 3 DCGM metrics', MIG's
    ({"kind": "k8s-pods", "prometheus_url": "http://p:9090", "dcgm_metrics": [], "namespaces": ["ml"]}, 18 * 30),
    # 400 days at hourly steps: one piece for each of 18 queries and 4 hourly ones
    ({"kind": "k8s-pods", "prometheus_url": "http://p:9090", "lookback_hours": 9600, "cluster_label": "c",
      "step_seconds": 3600}, (18 + 4) * 30),
    # at 60 s steps, 58 pieces of 10,001 points for each of the 18: (18 x 58 + 4) x 30 = 31,440 s, more than
    # deadline_seconds may be set to: the most, 3600 (and 30 days at 15 s steps, 310 requests' 9,300 s)
    ({"kind": "k8s-pods", "prometheus_url": "http://p:9090", "lookback_hours": 9600, "cluster_label": "c"}, 3600),
    ({"kind": "k8s-pods", "prometheus_url": "http://p:9090", "step_seconds": 15, "lookback_hours": 720}, 3600),
    ({"kind": "k8s-pods", "prometheus_url": "http://p:9090", "timeout_seconds": 600, "deadline_seconds": 900}, 900)])
def test_the_deadline_by_default_gives_each_request_its_timeout(source, deadline):
    config = parse_config({"inventory": [{"name": "jobs", **source}]})
    assert config.inventory[0].deadline == deadline


@pytest.mark.parametrize("kind, origin", [("k8s-pods", {"prometheus_url": "http://p:9090"}),
                                          ("slurm-jobs", {"url": "http://s:6820"})])
def test_a_deadline_below_timeout_seconds_is_a_config_error(kind, origin):
    with pytest.raises(ConfigError) as raised:
        parse_config({"inventory": [{"name": "jobs", "kind": kind, **origin, "timeout_seconds": 120,
                                     "deadline_seconds": 60}]})
    assert "inventory[0].deadline_seconds: 60 s is less than timeout_seconds (120 s)" in raised.value.message
