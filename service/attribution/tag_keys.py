"""Tag keys: which of a line's keys a configured alias names (`tag_candidates`: `Team`,
`user:team` and `resource_tags_user_team` are one key), and the statements that list the
keys of the cost lines and of the inventory."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from service.attribution.statement import Sql
from service.core.folding import composed

KEY_PREFIXES = ("resource_tags_user_", "user:", "user_")
KEY_SEPARATORS = re.compile(r"[-_:\s]")


def normalise_key(key: str) -> str:
    """`Team`, `owner_team`, `user:team`, `user_team`, `resource_tags_user_team` → the same
    key: lowercased, one `user` prefix stripped, separators removed, composed (a key typed
    decomposed, NFD, is the bills' NFC key)."""
    key = composed(key.strip().lower())
    for prefix in KEY_PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            key = key[len(prefix):]
            break
    return KEY_SEPARATORS.sub("", key)


def tag_candidates(aliases: Sequence[str], keys: Iterable[str]) -> list[str]:
    """The original tag keys to try, in order: by configured alias, then (for keys naming
    the same alias, e.g. `Team` and `team` on one line) the exact spelling first, then byte
    order of the key."""
    by_norm: dict[str, list[str]] = {}
    for key in keys:
        by_norm.setdefault(normalise_key(key), []).append(key)
    ordered: list[str] = []
    for alias in aliases:
        for key in sorted(by_norm.get(normalise_key(alias), ()), key=lambda k: (k != alias, k)):
            if key not in ordered:
                ordered.append(key)
    return ordered


def all_tag_keys_sql() -> Sql:
    return Sql("SELECT DISTINCT unnest(map_keys(Tags)) FROM costs WHERE Tags IS NOT NULL", {})


def inventory_keys_sql() -> Sql:
    """Tag keys of the inventory (`resource_tags`); run only when the lake has that table."""
    return Sql("SELECT DISTINCT key FROM resource_tags WHERE key IS NOT NULL", {})


def tag_keys_sql(source: str, period: str) -> Sql:
    return Sql("SELECT DISTINCT unnest(map_keys(Tags)) FROM costs WHERE source = $source AND billing_period = $period "
               "AND Tags IS NOT NULL", {"source": source, "period": period})
