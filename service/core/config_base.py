"""The base every config section builds on (kept apart so sections can live in their own
modules without importing service.core.config)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr


class Strict(BaseModel):
    """Base for every config section: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfigEntry(Strict):
    """An entry of a config list (`sources`, `inventory`). `config_path` names it as the config's
    errors do, by its place in the file's list (`inventory[2]`: service/core/config_paths.py
    `anchored` sets it), so a run's errors point at the same entry; one made in code, read from no
    config, is `<section>.<name>`."""

    section: ClassVar[str]
    _key: str = PrivateAttr(default="")

    @property
    def config_path(self) -> str:
        return self._key or f"{self.section}.{getattr(self, 'name', '')}"


class SourceEntry(ConfigEntry):
    section = "sources"


class InventoryEntry(ConfigEntry):
    section = "inventory"

    def unread_settings(self) -> frozenset[str]:
        """Settings this entry has that its origin does not read (a `path` source's API window):
        two configs differing only in them store the same snapshots (service/core/claims.py)."""
        return frozenset()


class NestedValueError(ValueError):
    """A validation error found by a parent section about one of its children: `subpath`
    (e.g. ('shared', 0, 'by')) is appended to the section's dotted path."""

    def __init__(self, subpath: tuple[str | int, ...], message: str):
        super().__init__(message)
        self.subpath = subpath


def exactly_one(section: BaseModel, options: dict[str, str]) -> None:
    """A ValueError unless exactly one of the fields `options` names is set (field → how the
    message shows it, e.g. {"url": "url (slurmrestd)"})."""
    chosen = [name for name in options if getattr(section, name)]
    if len(chosen) != 1:
        *first, last = options.values()
        raise ValueError(f"set exactly one of {', '.join(first)} or {last}"
                         + (f" (found {', '.join(chosen)})" if chosen else ""))


def _plain_userinfo(url: str) -> str:
    """A URL whose `user:password@` (read to its last `@`) holds a character that ends a URL's
    authority or its redaction: the HTTP client took the password's tail for the path or query
    and its error showed the head. The message never shows the value."""
    scheme, _, rest = url.partition("://")
    userinfo = rest.rpartition("@")[0]
    if set(userinfo) & set("/?#\"<>"):
        raise ValueError(f"the user:password before the last '@' of this {scheme}:// URL holds a / ? # \" < or >; "
                         "percent-encode it in the password (/ as %2F, ? as %3F, # as %23, \" as %22, "
                         "< as %3C, > as %3E)")
    return url


# An http(s) URL setting (a Prometheus, slurmrestd or S3 endpoint), its credentials written plainly
HttpUrl = Annotated[str, Field(pattern=r"^https?://\S+$"), AfterValidator(_plain_userinfo)]
