"""The container image, docker-compose and Kubernetes manifests: what they promise (non-root,
read-only root filesystem, one service per lake, loopback-only host ports, probes on the
service's endpoints) checked from the files, and the configs they carry loaded by spendlake."""

from __future__ import annotations

import os
import re

import boto3
import pytest
import yaml
from conftest import REPO

from service.core.config import load_config, parse_config
from service.serve.app import TOKEN_ENV, api_token

DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"


def k8s() -> dict[str, dict]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    docs = [yaml.safe_load((K8S / name).read_text()) for name in kustomization["resources"]]
    assert {p.name for p in K8S.glob("*.yaml")} == set(kustomization["resources"]) | {"kustomization.yaml"}
    return {doc["kind"]: doc for doc in docs}


def test_dockerfile_is_multi_stage_slim_non_root_with_a_healthcheck():
    text = (REPO / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(stages) == 2 and all(s.endswith("-slim") for s in stages)
    assert re.search(r"^USER 10001", text, re.M) and "COPY --from=build" in text
    assert "127.0.0.1:9464/healthz" in text.split("HEALTHCHECK", 1)[1].split("\n\n")[0]
    assert re.search(r'^ENTRYPOINT \["spendlake", "serve"\]', text, re.M)
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".git", ".venv", "spendlake-data", "tests"} <= set(ignored)


def test_compose_runs_the_four_services_with_the_shipped_files_on_loopback_ports():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"spendlake", "prometheus", "alertmanager", "grafana"}
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), (name, source)
    assert services["spendlake"]["read_only"] is True
    assert load_config(DEPLOY / "spendlake.yaml").lake.as_posix() == "/var/lib/spendlake/lake"


def test_compose_and_kubernetes_give_running_jobs_the_same_time_to_finish_on_sigterm():
    """`serve` waits for running jobs on SIGTERM; compose's default 10 s before SIGKILL threw away
    any ingest or report longer than that on every `docker compose restart` after a config edit."""
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]["spendlake"]
    pod = k8s()["Deployment"]["spec"]["template"]["spec"]
    assert compose["stop_grace_period"] == f"{pod['terminationGracePeriodSeconds']}s"


def uncommented(name: str) -> dict:
    """A manifest with its commented-out YAML (comment lines whose text starts with `-`, a space
    or a key) taken in: what a user who uncomments it applies."""
    return yaml.safe_load(re.sub(r"^(\s*)# (?=[- ]|[\w.-]+:(?: |$))", r"\1", (K8S / name).read_text(), flags=re.M))


def egress_ports(policy: dict) -> set[int]:
    return {port["port"] for rule in policy["spec"]["egress"] for port in rule["ports"]}


def test_the_network_policy_admits_the_monitoring_namespace_by_the_label_kubernetes_sets():
    """`name: monitoring` is a label no namespace has unless someone adds it: no scrape came
    through. Kubernetes labels every namespace `kubernetes.io/metadata.name`."""
    policy = k8s()["NetworkPolicy"]["spec"]
    [rule] = policy["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    [prometheus] = [r for r in policy["egress"] if r.get("to")]
    assert prometheus["to"] == rule["from"] and prometheus["ports"] == [{"protocol": "TCP", "port": 9090}]


def test_every_in_cluster_source_port_the_readme_shows_has_an_egress_rule_to_uncomment():
    """The policy allowed DNS and 443 only: README's `prometheus_url: http://prometheus:9090`,
    slurmrestd on 6820 and MinIO on 9000 timed out every ingest."""
    shown = {int(port) for port in re.findall(r"\b(?:prometheus_url|url|endpoint_url): \"?http://[\w.-]+:(\d+)",
                                              (REPO / "README.md").read_text())}
    assert shown == {9090, 6820, 9000}
    assert shown <= egress_ports(uncommented("networkpolicy.yaml"))
    assert egress_ports(k8s()["NetworkPolicy"]) == {53, 443, 9090}  # the rest only once uncommented


def test_the_service_monitor_shows_the_token_it_sends_from_the_deployments_secret():
    """With service.metrics_auth: token, prometheus.yml's comment showed the token; the
    ServiceMonitor had nothing, and its scrapes got a 401."""
    [endpoint] = uncommented("servicemonitor.yaml")["spec"]["endpoints"]
    [env] = [e for e in k8s()["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
             if e["name"] == TOKEN_ENV]
    secret = env["valueFrom"]["secretKeyRef"]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": secret["name"], "key": secret["key"]}}
    assert "authorization" not in k8s()["ServiceMonitor"]["spec"]["endpoints"][0]  # commented: no token by default


def test_the_liveness_probe_gives_a_busy_service_three_minutes_before_a_restart():
    """A restart kills a running ingest or daily report: three failures 30 s apart (the default
    failureThreshold), each after 1 s, restarted the pod after 90 s of a loaded machine or a flood."""
    probe = k8s()["Deployment"]["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 180 and probe["timeoutSeconds"] >= 5


def test_kubernetes_deployment_is_non_root_read_only_and_single():
    docs = k8s()
    assert set(docs) == {"ServiceAccount", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service",
                         "ServiceMonitor", "PrometheusRule", "NetworkPolicy"}
    deployment = docs["Deployment"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"]["type"] == "Recreate"
    pod = deployment["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # ready = answers requests: /readyz fails while a source is stale or the lake unreadable, and the
    # only pod NotReady drops the Service's endpoint: the API, the reports and the scrape that fires
    # SpendlakeSourceStale / SpendlakeLakeUnreadable all gone for a data problem (ops41)
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert volumes[mounts["/var/lib/spendlake"]]["persistentVolumeClaim"]["claimName"] == \
        docs["PersistentVolumeClaim"]["metadata"]["name"]
    assert volumes[mounts["/etc/spendlake"]]["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
    config = parse_config(yaml.safe_load(docs["ConfigMap"]["data"]["spendlake.yaml"]), "/etc/spendlake/spendlake.yaml")
    assert str(config.lake).startswith("/var/lib/spendlake")  # on the volume, not the read-only root


def test_service_monitor_and_network_policy_select_the_pods_and_the_port():
    docs = k8s()
    labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    service = docs["Service"]["spec"]
    assert service["selector"].items() <= labels.items()
    [port] = service["ports"]
    assert port["name"] == docs["ServiceMonitor"]["spec"]["endpoints"][0]["port"] and port["port"] == 9464
    assert docs["ServiceMonitor"]["spec"]["selector"]["matchLabels"].items() <= \
        docs["Service"]["metadata"]["labels"].items()
    policy = docs["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert [p["port"] for rule in policy["ingress"] for p in rule["ports"]] == [9464]
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}


def compose_environment(service: dict, host: dict[str, str]) -> dict[str, str]:
    """The variables a compose service's container gets: `NAME:` without a value passes the
    host's (unset when the host has none); `${NAME:-default}` is the host's value unless empty."""
    resolved = {}
    for name, value in service.get("environment", {}).items():
        if value is None:
            if name in host:
                resolved[name] = host[name]
            continue
        resolved[name] = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: host.get(m[1]) or m[2] or "", value)
    return resolved


@pytest.mark.parametrize("host", [{}, {"AWS_DEFAULT_REGION": "eu-west-1", "SPENDLAKE_API_TOKEN": "t" * 24}],
                         ids=["nothing set", "region and token set"])
def test_compose_environment_starts_the_service_in_the_region_set(host, tmp_path, monkeypatch):
    """`docker compose up` with nothing exported must start (an empty token was a config
    error), and the region the operator sets must be the one boto3 uses (it ignores AWS_REGION)."""
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    for name in [n for n in os.environ if n.startswith("AWS_") or n == TOKEN_ENV]:
        monkeypatch.delenv(name)
    for name, value in compose_environment(compose["services"]["spendlake"], host).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))  # no profile of this machine's
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    assert api_token(parse_config({"lake": str(tmp_path / "lake")}, str(tmp_path / "spendlake.yaml"))) == \
        host.get("SPENDLAKE_API_TOKEN")
    assert boto3.session.Session().region_name == host.get("AWS_DEFAULT_REGION", "us-east-1")


def test_kubernetes_loads_the_shipped_alert_rules():
    """The Prometheus operator reads rules from PrometheusRule objects only: without one, a
    `kubectl apply -k deploy/k8s` install scraped spendlake and never alerted."""
    rule = k8s()["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"]["groups"] == yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
    assert rule["metadata"]["labels"].items() >= k8s()["ServiceMonitor"]["metadata"]["labels"].items()
