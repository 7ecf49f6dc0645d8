"""SigV4-signed queries for Amazon Managed Service for Prometheus (AMP), whose query API answers
403 to an unsigned request. A Prometheus source's `sigv4:` block turns signing on, spelled as
Prometheus's own remote_write and Grafana spell it: `region` (default: the one in an
`aps-workspaces.<region>.amazonaws.com` URL) and `profile` (default: boto3's default chain).
botocore signs each request (service `aps`) with the credentials read when it is sent (a role's
keys rotate); they travel in the signed headers only, which no error or log line shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

from pydantic import Field

from service.core.config_base import Strict
from service.core.errors import SourceError

SERVICE = "aps"
WORKSPACE_HOST = re.compile(r"^aps-workspaces\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
Signer = Callable[[str], dict[str, str]]  # a request's URL → the headers that sign it


class Sigv4(Strict):
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d+$",
                               description="the workspace's region; default: the one in its URL")
    profile: str | None = Field(default=None, min_length=1, description="an AWS profile; default: the default chain")


def check_sigv4(sigv4: Sigv4 | None, url: str | None) -> None:
    """A ValueError for a `sigv4:` block that cannot sign queries to `url`."""
    if sigv4 is None:
        return
    if url is None:
        raise ValueError("sigv4 signs the queries to prometheus_url: set it, or drop sigv4")
    if "@" in urlsplit(url).netloc:
        raise ValueError("sigv4 signs the queries: take the user:password@ out of prometheus_url")
    if _region(sigv4, url) is None:
        raise ValueError("set sigv4.region to the workspace's region (prometheus_url names none: "
                         "it is not https://aps-workspaces.<region>.amazonaws.com/...)")


def prometheus_access(sigv4: Sigv4 | None, url: str, config_path: str) -> tuple[Signer | None, str]:
    """The signer of a Prometheus source's queries (None without `sigv4`), and what to do when
    the server answers 403 (AMP's answer to an unsigned or unauthorised query)."""
    if sigv4 is None:
        if WORKSPACE_HOST.match(urlsplit(url).hostname or ""):
            first = "an Amazon Managed Service for Prometheus workspace takes only SigV4-signed queries: set"
        else:  # a proxy refusing the URL's credentials, or a workspace behind another name
            first = f"check the credentials in {config_path}.prometheus_url, or for Amazon Managed Service for Prometheus set"
        return None, f"{first} {config_path}.sigv4.region (README: k8s-pods)"
    return _signer(sigv4, url, config_path), (
        f"grant aps:QueryMetrics on this workspace to the AWS credentials in use (deploy/iam/spendlake-readonly.json) "
        f"and check {config_path}.sigv4")


def _region(sigv4: Sigv4, url: str) -> str | None:
    found = WORKSPACE_HOST.match(urlsplit(url).hostname or "")
    return sigv4.region or (found.group(1) if found else None)


def _signer(sigv4: Sigv4, url: str, config_path: str) -> Signer:
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.exceptions import BotoCoreError

    where, region = f"{config_path}.sigv4", _region(sigv4, url)
    hint = "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, attach a role, or refresh them (aws sso login)"
    try:
        credentials = boto3.session.Session(profile_name=sigv4.profile).get_credentials()
    except BotoCoreError as exc:
        raise SourceError(f"cannot read AWS credentials to sign Prometheus queries: {exc}", where=where,
                          hint=hint) from None
    if credentials is None:
        raise SourceError("no AWS credentials found to sign Prometheus queries", where=where, hint=hint)

    def sign(target: str) -> dict[str, str]:
        request = AWSRequest(method="GET", url=target)
        try:
            SigV4Auth(credentials.get_frozen_credentials(), SERVICE, region).add_auth(request)
        except BotoCoreError as exc:  # refreshing expired credentials failed
            raise SourceError(f"cannot refresh AWS credentials to sign Prometheus queries: {exc}", where=where,
                              hint=hint) from None
        return dict(request.headers.items())

    return sign
