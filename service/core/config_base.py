"""The base every config section builds on (kept apart so sections can live in their own
modules without importing service.core.config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base for every config section: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
