"""boto3 clients for read-only AWS APIs, and the translation of their errors into ours.

Clients use the standard credential chain and the standard retry mode: throttling
(ThrottlingException, SlowDown, TooManyRequests) and 5xx are retried with backoff up to
`max_attempts`. Errors become a SourceError that names the API action and the resource,
and says what to do next (refresh credentials, grant the action, check the config path).
A client may be given a timeout for each attempt's connect and reads, and a deadline over all of
its calls (`ends_by`); `held_client` gives it both from a source's timeout_seconds and deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from service.core.deadline import Deadline
from service.core.errors import SourceError

CREDENTIAL_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired", "InvalidToken",
                              "InvalidAccessKeyId", "SignatureDoesNotMatch", "TokenRefreshRequired",
                              "UnrecognizedClientException", "InvalidClientTokenId"})
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "403", "AllAccessDisabled"})
MIN_ATTEMPT_SECONDS = 0.1  # an attempt's connect and reads at least (what is left of the deadline)


def make_client(service: str, *, config_path: str, region: str | None = None, profile: str | None = None,
                endpoint_url: str | None = None, max_attempts: int = 5, timeout: float | None = None,
                profile_set_by: str | None = None) -> Any:
    """`timeout`: each attempt's connect and each of its reads (botocore's default: 60 s each);
    `profile_set_by`: what an unknown profile's hint says to set (_session)."""
    from botocore.config import Config as BotoConfig

    waits = {"connect_timeout": timeout, "read_timeout": timeout} if timeout else {}
    return _session(profile, config_path, region, profile_set_by).client(service, endpoint_url=endpoint_url,
                          # total_max_attempts counts the first call too (botocore's max_attempts would not)
                          config=BotoConfig(retries={"mode": "standard", "total_max_attempts": max_attempts},
                                            **waits))


def ends_by(client: Any, deadline: Deadline, where: str, smaller: str) -> Any:
    """`client`, its calls held to `deadline` (the source's, over all of them): once it has passed,
    no attempt is sent, no answer taken and no retry waited for; the deadline's SourceError instead
    (`where` and `smaller` as http_json names them). A backoff botocore began before it (its standard
    mode's: 20 s at most, 25 s where AWS says when to retry) may end past it; the attempt after it is
    not sent. Made with a `timeout` no longer than what is left, an attempt ends by it too."""
    return held_to(client, lambda: deadline, where, smaller)


def held_to(client: Any, deadline_now: Callable[[], Deadline | None], where: str, smaller: str) -> Any:
    """`client`, each call held as ends_by holds it to the deadline `deadline_now()` gives when an attempt
    is sent or retried (a long-lived client's, one for each thing it does); None holds it to none."""

    def past(**_) -> None:
        deadline = deadline_now()
        if deadline is not None and time.monotonic() >= deadline.at:
            raise deadline.overdue(where, smaller)

    client.meta.events.register_first("before-send", past)  # before moto's stand-in, in tests
    client.meta.events.register_first("needs-retry", past)
    return client


def attempt_timeout(timeout_seconds: float, deadline: Deadline) -> float:
    """An attempt's connect and reads: timeout_seconds, or what is left of `deadline` when less."""
    return max(min(timeout_seconds, deadline.left()), MIN_ATTEMPT_SECONDS)


def held_client(service: str, settings: Any, *, config_path: str, region: str | None, deadline: Deadline,
                where: str, smaller: str) -> Any:
    """A client of `service` with a source's `settings` (profile, endpoint_url, max_attempts, and
    timeout_seconds for each attempt's connect and reads, or what is left of `deadline` when less),
    its calls held to `deadline` (ends_by, `where` and `smaller` as it names them)."""
    client = make_client(service, config_path=config_path, region=region, profile=settings.profile,
                         endpoint_url=settings.endpoint_url, max_attempts=settings.max_attempts,
                         timeout=attempt_timeout(settings.timeout_seconds, deadline))
    return ends_by(client, deadline, where, smaller)


def default_region(profile: str | None, config_path: str) -> str:
    """The region the credential chain would use (AWS_DEFAULT_REGION, else the profile's `region`; boto3
    ignores AWS_REGION), else us-east-1."""
    return _session(profile, config_path).region_name or "us-east-1"


def _session(profile: str | None, config_path: str, region: str | None = None,
             profile_set_by: str | None = None) -> Any:
    """A boto3 session; a profile the AWS config files do not have is one sentence naming what set it
    (`profile_set_by`: by default `<config_path>.profile` or $AWS_PROFILE; `export` has only the
    latter), not botocore's ProfileNotFound traceback."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    try:
        return boto3.session.Session(profile_name=profile, region_name=region)
    except ProfileNotFound as exc:
        set_by, unset = ((profile_set_by, "it") if profile_set_by
                         else (f"{config_path}.profile (or AWS_PROFILE)", "both"))
        raise SourceError(f"no AWS profile named {exc.kwargs.get('profile')!r} in the AWS config or credentials "
                          "files", hint=f"set {set_by} to one that `aws configure list-profiles` shows, or leave "
                          f"{unset} unset for the default chain") from None


def region_of(arn: str) -> str | None:
    """arn:aws:ec2:us-east-1:123:instance/i-1 → us-east-1; global ARNs (S3) have none."""
    parts = arn.split(":", 5)
    return (parts[3] or None) if len(parts) > 3 else None


def aws_error(exc: Exception, action: str, where: str, config_path: str) -> SourceError:
    """One SourceError for a botocore exception raised by `action` on the resource `where`."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, PartialCredentialsError

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return SourceError("no AWS credentials found", where=where,
                           hint="set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or attach a role")
    if isinstance(exc, EndpointConnectionError):
        return SourceError(f"{action}: cannot reach the endpoint ({exc})", where=where,
                           hint=f"check {config_path}.endpoint_url / regions and the network")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        if code in CREDENTIAL_CODES:
            return SourceError(f"AWS credentials are expired or invalid ({code})", where=where,
                               hint="refresh them (e.g. `aws sso login`) and run again")
        if code in DENIED_CODES:
            return SourceError(f"access denied for {action}", where=where,
                               hint=f"grant {action} on this resource (see deploy/iam/spendlake-readonly.json)")
        if code in ("Throttling", "ThrottlingException", "TooManyRequestsException", "SlowDown"):
            return SourceError(f"{action} still throttled after the configured retries ({code})", where=where,
                               hint=f"raise {config_path}.max_attempts or run later")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if status >= 500:  # retried as transient up to max_attempts: AWS is failing, not the config
            answer = f"{status} {code}" if code and code != str(status) else str(status)
            return SourceError(f"{action} still failing after the configured retries (AWS answered {answer})",
                               where=where, hint=f"run later, or raise {config_path}.max_attempts")
        message = error.get("Message") or ""
        return SourceError(f"{action} failed: {code} {message}".rstrip(), where=where,
                           hint=f"check {config_path}")
    return SourceError(f"{action} failed: {exc}", where=where, hint=f"check {config_path}")
