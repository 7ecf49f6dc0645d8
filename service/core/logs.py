"""Logging set-up. A filter redacts credentials from every record, botocore's DEBUG
output and tracebacks included (they show request headers: Authorization,
X-Amz-Security-Token, and URLs with their `user:password@`). A message is one line, its
control characters shown as escapes: a job name or a file's header holding a line break or
an ANSI escape can neither forge a log line nor rewrite the terminal that shows the log.
In a traceback, each exception's message is one line too; the frames keep theirs."""

from __future__ import annotations

import base64
import logging
import re
import time
import traceback

from service.core.output import one_line, printable_lines

# The names a secret follows as its key (`token: …`, `Bearer …`, `X-Api-Key: …`), alone or ending a
# compound name (`api_key`, `X-SLURM-USER-TOKEN`; `apikey` and `oauth` are whole words of their own):
# one list for a hidden secret's value positions and for a URL's query parameters.
SECRET_KEYS = ("bearer", "basic", "token", "password", "passwd", "pass", "pwd", "secret", "key", "apikey", "jwt",
               "auth", "oauth")
# what a server says of a key before echoing its value (`token expired ab`)
KEY_STATES = ("expired", "invalid", "revoked", "rejected", "refused", "unknown", "missing", "required")
# what the config validator writes after a key's dotted path (service/core/validation.py, config_plugins.py:
# `service.secret_key: unknown key`, `sources[0].secret_key: kind focus takes no such key`; it never writes
# the value), which an AWS secret's pattern must not take for the value
VALIDATOR_WORDS = ("unknown", "kind")
NOT_VALIDATOR_WORDS = rf"(?!(?:{'|'.join(VALIDATOR_WORDS)})\s)"  # a value's start: not one of them and more text
# a credential's shape: a token of base64, base64url or a JWT's characters holding a digit or
# one of `.~+/=` (a word, `credentials_file`, `token-based`, holds none), or 24 of them or more
# (a random token of letters alone), ending in a letter, a digit or base64's `=` padding (a
# sentence's `token.` is the word `token` and its full stop)
CREDENTIAL = (r"(?=[A-Za-z0-9._~+/=-]*[0-9.~+/=]|[A-Za-z0-9._~+/=-]{24})"
              r"[A-Za-z0-9._~+/-]*[A-Za-z0-9]=*(?![A-Za-z0-9._~+/=-])")
# the headers that carry a credential (`Proxy-Authorization` ends in `authorization`), the schemes
# whose next word is the credential (`token` is not one: `Authorization: token rejected`), a header's
# value (up to a space, a quote, `,`, `;` or `&`, or an escaped line break: a request's repr shows `\r`),
# and what ends its line
CREDENTIAL_HEADER = r"(?:authorization|x-api-key)"
SCHEMES = ("basic", "bearer", "digest", "negotiate", "apikey")
HEADER_VALUE = r"[^\s'\",;&\\<][^\s'\",;&\\]*"  # not a placeholder's `<token>`, nor `<redacted>`
LINE_END = r"\s*(?:$|[\r\n'\",;}]|\\[rn])"
QUOTED = r'"[^"\r\n\\]*"'  # a cookie's quoted value (RFC 6265's DQUOTE cookie-octets DQUOTE)
# `scheme://user:password@host`: a Prometheus or S3 endpoint URL written with its credentials.
# Up to the authority's last `@`, as urlsplit and the HTTP client read it: a password written
# with a bare `@` (`p@ss`, not `p%40ss`) is still sent, and was shown from that `@` on. A `'`
# may stand in a password as written (RFC 3986), and `\'` as a repr() shows it.
URL_CREDENTIALS = (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#\"<>]+@"), r"\1<redacted>@")
REDACTIONS = (
    URL_CREDENTIALS,
    (re.compile(r"\b(AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{12,}\b"), "<redacted-key-id>"),
    (re.compile(rf"(?i)(x-amz-security-token['\"]?\s*[:=]\s*(?:b?['\"])?){NOT_VALIDATOR_WORDS}[^'\",\s}}]+"),
     r"\1<redacted>"),
    # a credential header's value (Authorization, Proxy-Authorization, X-Api-Key): all of it when quoted
    # (botocore's `{'Authorization': b'AWS4-…'}`), else a credential with or without its scheme
    # (`Authorization: Basic <b64>`), any value after a scheme that takes one (`Bearer abc`), and a value
    # of any length ending the header's line (`Authorization: hunter` and a line break, a quote or the
    # text's end: a request echoed; after `Token` too, or `&`: `x-api-key=k&n=1`), not the words a server
    # writes after the header's name (`Authorization: token rejected; check url`), nor a URL's query
    # parameter (after `?` or `&`: its value ends at a space, the last pattern's); a cookie's `name=value`
    # pairs, all of its line, a quoted value (`sid="abc"`, RFC 6265) whole
    (re.compile(rf"(?i)((?:{CREDENTIAL_HEADER}|cookie)['\"]?\s*[:=]\s*b?['\"])[^'\"}}]+"), r"\1<redacted>"),
    (re.compile(rf"(?i)(?<![?&])({CREDENTIAL_HEADER}\s*[:=]\s*)(?:(?:[a-z][a-z0-9-]*\s+)?{CREDENTIAL}"
                rf"|(?:{'|'.join(SCHEMES)})\s+{HEADER_VALUE}|(?:token\s+)?(?!(?:{'|'.join(KEY_STATES)})\b)"
                rf"{HEADER_VALUE}(?={LINE_END}|&))"), r"\1<redacted>"),
    (re.compile(rf"(?i)(cookie\s*[:=]\s*)(?=[^\s=;,'\"\\]+=)(?:{QUOTED}|[^\r\n'\"\\])*(?:{QUOTED}|[^\s'\"\\])"
                rf"(?={LINE_END})"), r"\1<redacted>"),
    (re.compile(r"(?i)(aws_secret_access_key|secret_key|session_token|SecretAccessKey|SessionToken)"
                rf"(['\"]?\s*[:=]\s*['\"]?){NOT_VALIDATOR_WORDS}[^'\",\s}}]+"), r"\1\2<redacted>"),
    (re.compile(r"(?i)(X-Amz-Credential=|X-Amz-Signature=|Signature=)[^&\s'\"]+"), r"\1<redacted>"),
    # a URL's query parameter holding a secret (the API token sent as `?token=`, in the access log)
    (re.compile(rf"(?i)([?&][a-z_-]*(?:{'|'.join(SECRET_KEYS)})=)[^&\s'\"]+"), r"\1<redacted>"),
)
# an Authorization header's credentials as a server echoes them without the header's name:
# `Basic <base64 of user:password>` (what decodes to a `:` pair), `Bearer <token>` and `Token
# <token>` (a CREDENTIAL: `Bearer authentication` and `a Bearer token.` are phrases; after
# `token`, one of 8 characters or more: `a token 3 days old` is one too)
BASIC = re.compile(r"(?i)\b(basic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")
BEARER = re.compile(rf"(?i)\b(bearer\s+|token\s+(?=[A-Za-z0-9._~+/=-]{{8}})){CREDENTIAL}")


# Secrets read from the environment (a slurmrestd JWT) or a URL's userinfo: no pattern knows
# their shape, and a server or a proxy may write the one it was sent into its error, so their
# values are redacted: one of WORD_BELOW characters or more wherever it stands; a shorter one (a
# 6-character password) only where it stands as a value, as servers echo one: after `=`, as a
# URL's `//user:secret@`, alone in quotes, after one of SECRET_KEYS (and their `:`, or a word of
# KEY_STATES). Anywhere, a 4-digit one blanked row counts and amounts; after any `:`, a one-letter one
# blanked the word of `source: a` (each secret → None, or its pattern as a value).
SECRETS: dict[str, re.Pattern[str] | None] = {}
WORD_BELOW = 8
VALUE_AFTER = (r"""(?:=\s*['"]?|(?i:(?<![a-z0-9])"""  # `api_key`'s key: `_` is not a \b
               rf"""(?:{'|'.join(SECRET_KEYS)})\b(?:\s+(?:{'|'.join(KEY_STATES)})\b)?)['"]?\s*[:=]?\s*['"]?)""")


def as_a_value(secret: str) -> re.Pattern[str]:
    # a secret ending in a letter or digit must end its value (`cat7` is not `concat7`'s or
    # `cat7s`'s); one ending in a sign (`pass!`) ends there, whatever follows
    end = r"(?!\w)" if re.match(r"\w", secret[-1]) else ""
    escaped = re.escape(secret)
    return re.compile(rf"""({VALUE_AFTER}){escaped}{end}|(?<=\w:){escaped}(?=@)|(?<=['"]){escaped}(?=['"])""")


def hide(secret: str) -> None:
    """Redact `secret` from every error and log line from now on."""
    if secret:
        SECRETS[secret] = None if len(secret) >= WORD_BELOW else as_a_value(secret)


def redact(text: str) -> str:
    """`text` with every credential redacted: a URL's `user:password@`, every hidden secret, the
    shapes of REDACTIONS, a `Basic`/`Bearer` credential. The one path for errors (their message,
    where and hint: what the CLI, the lake's state, status and the API show) and log lines."""
    pattern, replacement = URL_CREDENTIALS
    text = pattern.sub(replacement, text)  # first: a URL's whole userinfo goes, not its password alone
    for secret, value in tuple(SECRETS.items()):  # a copy: another thread may hide one meanwhile
        text = text.replace(secret, "<redacted>") if value is None else value.sub(redacted_value, text)
    for pattern, replacement in REDACTIONS:
        text = pattern.sub(replacement, text)
    text = BASIC.sub(lambda found: found[1] + "<redacted>" if _a_pair(found[2]) else found[0], text)
    return BEARER.sub(r"\1<redacted>", text)


def redacted_value(found: re.Match[str]) -> str:
    return (found[1] or "") + "<redacted>"  # what stands before it (`=`, `token `) kept


def _a_pair(encoded: str) -> bool:
    """Whether `encoded` is base64 of `user:password`, as HTTP Basic auth sends it."""
    try:
        return b":" in base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except ValueError:
        return False


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = one_line(redact(message))
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:  # to redact it
            record.exc_text = traceback_text(record.exc_info[1])
        if record.exc_text:
            record.exc_text = printable_lines(redact(record.exc_text))
        return True


def traceback_text(exc: BaseException) -> str:
    """`exc`'s traceback as logging writes it, with the message of each exception in its chain
    on one line: a message quotes values (a file's cell, a job name) that may hold a line feed."""
    formatted = traceback.TracebackException.from_exception(exc)
    messages, pending = set(), [formatted]
    while pending:
        each = pending.pop()
        messages.update(each.format_exception_only())
        pending += [linked for linked in (each.__cause__, each.__context__) if linked is not None]
    return "".join(one_line(chunk.rstrip("\n")) + "\n" if chunk in messages else chunk
                   for chunk in formatted.format()).rstrip("\n")


def setup_logging(level: int = logging.WARNING) -> None:
    handler = logging.StreamHandler()
    # UTC, marked so, like every time the service prints (a daily_at, a window): logging's
    # default is the host's zone without one, so TZ=Asia/Kolkata read 5:30 apart from its lines
    stamps = logging.Formatter("%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s",
                               datefmt="%Y-%m-%dT%H:%M:%S")
    stamps.converter = time.gmtime
    handler.setFormatter(stamps)
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
