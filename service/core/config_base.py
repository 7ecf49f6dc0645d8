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
