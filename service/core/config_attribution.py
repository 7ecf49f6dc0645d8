"""The `attribution` section of the config: dimensions (tag keys, virtual-tag rules, default)
and shared-cost rules. How it is applied: service/attribution/api.py."""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from service.core.config_base import NestedValueError, Strict
from service.core.config_clusters import JOB_MATCH_FIELDS, ClustersConfig, gpu_table_digest, job_dimension_tags
from service.core.folding import composed, folded

# What a virtual-tag rule or a shared-cost rule may match on → canonical cost column.
# Dimension names may be used as match keys too (another dimension's value).
MATCH_FIELDS = {
    "account": "SubAccountId",
    "service": "ServiceName",
    "resource_id": "ResourceId",  # a regular expression
    "usage_type": "x_usage_type",
    "region": "RegionId",
    "charge_category": "ChargeCategory",
}
REGEX_FIELDS = ("resource_id", "job_name")  # matched as regular expressions, the others as values
PREDEFINED_DIMENSIONS = ("team", "project", "experiment")
# Keys of an attribution result row; a dimension may not take these names.
RESERVED_NAMES = frozenset({"currency", "cost", "period", "share", "source", "billing_period", "other"})
DIMENSION_NAME = r"^[a-z][a-z0-9_]{0,39}$"


def _check_match(match: dict[str, str]) -> dict[str, str]:
    if not match:
        raise ValueError("needs at least one condition, e.g. {service: \"AWS Support (Business)\"}")
    for key in REGEX_FIELDS:
        if match.get(key) is not None:
            try:
                re.compile(match[key])
            except re.error as exc:
                raise NestedValueError((key,), f"not a valid regular expression: {exc}") from None
    for key, value in match.items():
        if not value.strip():
            raise NestedValueError((key,), "must not be empty")
    return match


class AttributionRule(Strict):
    """A virtual tag: when every condition of `match` holds, the dimension takes `value`."""

    match: dict[str, str]
    value: str = Field(min_length=1, pattern=r"\S")

    _match = field_validator("match")(_check_match)
    _value = field_validator("value")(composed)  # typed decomposed, still the bills' (NFC) value


class DimensionConfig(Strict):
    tags: tuple[str, ...] = ()  # tag keys tried in order; empty means just the dimension's name
    rules: tuple[AttributionRule, ...] = ()
    default: str = Field(default="unallocated", min_length=1, pattern=r"\S")

    _default = field_validator("default")(composed)


class SharedCostRule(Strict):
    """Lines matching `match` are not anyone's direct spend: they are split across the
    values of dimension `by`."""

    match: dict[str, str]
    split: Literal["even", "proportional", "fixed"]
    by: str = "team"
    weights: dict[str, Decimal] | None = None

    _match = field_validator("match")(_check_match)

    @field_validator("weights")
    @classmethod
    def _composed(cls, weights: dict[str, Decimal] | None) -> dict[str, Decimal] | None:
        if weights is None or len({composed(value) for value in weights}) < len(weights):
            return weights  # a value twice: _weights names it
        return {composed(value): weight for value, weight in weights.items()}

    @model_validator(mode="after")
    def _weights(self) -> SharedCostRule:
        if self.split != "fixed":
            if self.weights is not None:
                raise NestedValueError(("weights",), f"only split: fixed takes weights (this rule splits {self.split})")
            return self
        if not self.weights:
            raise NestedValueError(("weights",), "split: fixed needs weights, e.g. {pretrain: 0.6, eval: 0.4}")
        seen: set[str] = set()
        for value, weight in self.weights.items():
            if weight <= 0:
                raise NestedValueError(("weights", value), "must be greater than 0")
            if folded(value) in seen or not value.strip():
                raise NestedValueError(("weights", value), "names a value twice (values compare case-insensitively)")
            seen.add(folded(value))
        total = sum(self.weights.values(), Decimal(0))
        if total != 1:
            raise NestedValueError(("weights",), f"must sum to 1 exactly, they sum to {total}")
        return self


class AttributionConfig(Strict):
    """How every dollar gets a value per dimension (see service/attribution/api.py)."""

    dimensions: dict[str, DimensionConfig] = Field(default_factory=dict, validate_default=True)
    shared: tuple[SharedCostRule, ...] = ()
    clusters: ClustersConfig | None = None  # shared GPU clusters: service/attribution/allocation.py

    @model_validator(mode="before")
    @classmethod
    def _job_dimensions(cls, data: Any) -> Any:
        """With `clusters:`, the job dimensions exist (declared ones keep their settings)."""
        if not isinstance(data, dict) or data.get("clusters") is None:
            return data
        clusters = data["clusters"]
        cluster_tag = clusters.get("cluster_tag") if isinstance(clusters, dict) else None
        tags = job_dimension_tags(cluster_tag if isinstance(cluster_tag, str) else None)
        declared = data.get("dimensions") or {}
        if not isinstance(declared, dict):
            return data
        return {**data, "dimensions": {**{name: {"tags": list(keys)} for name, keys in tags.items()
                                          if name not in declared}, **declared}}

    @field_validator("dimensions")
    @classmethod
    def _predefined(cls, dims: dict[str, DimensionConfig]) -> dict[str, DimensionConfig]:
        for name in dims:
            if not re.match(DIMENSION_NAME, name) or name in RESERVED_NAMES:
                raise NestedValueError((name,), "a dimension name is lowercase letters, digits and _ "
                                                f"(not one of {', '.join(sorted(RESERVED_NAMES))})")
        full = {name: DimensionConfig() for name in PREDEFINED_DIMENSIONS}
        full.update(dims)
        return full

    @model_validator(mode="after")
    def _references(self) -> AttributionConfig:
        known = ", ".join(self.dimensions)
        for name, dim in self.dimensions.items():
            for i, rule in enumerate(dim.rules):
                for key in rule.match:
                    if key == name:
                        raise NestedValueError(("dimensions", name, "rules", i, "match", key),
                                               "a dimension's rule cannot match on its own value")
                    self._check_key(key, ("dimensions", name, "rules", i, "match", key), known)
        for i, rule in enumerate(self.shared):
            if rule.by not in self.dimensions:
                raise NestedValueError(("shared", i, "by"), f"unknown dimension {rule.by!r}; declared: {known}")
            for key in rule.match:
                self._check_key(key, ("shared", i, "match", key), known)
        self.dimension_order()  # raises on a cycle
        return self

    def _check_key(self, key: str, path: tuple, known: str) -> None:
        if key in MATCH_FIELDS or key in self.dimensions:
            return
        if key in JOB_MATCH_FIELDS:
            if self.clusters is None:
                raise NestedValueError(path, f"{key} is a job's field: it needs the `clusters:` section "
                                             "(attribution.clusters), which places GPU instances' cost on jobs")
            return
        fields = ", ".join([*MATCH_FIELDS, *(JOB_MATCH_FIELDS if self.clusters is not None else ())])
        raise NestedValueError(path, f"unknown match key; use one of {fields} or a dimension ({known})")

    def dimension_order(self) -> tuple[str, ...]:
        """Dimensions in an order where a rule only reads dimensions computed before it."""
        order: list[str] = []
        visiting: list[str] = []

        def visit(name: str) -> None:
            if name in order:
                return
            if name in visiting:
                cycle = " → ".join(visiting[visiting.index(name):] + [name])
                raise NestedValueError(("dimensions", name, "rules"), f"rules depend on each other in a cycle: {cycle}")
            visiting.append(name)
            for rule in self.dimensions[name].rules:
                for key in rule.match:
                    if key in self.dimensions:
                        visit(key)
            visiting.pop()
            order.append(name)

        for name in self.dimensions:
            visit(name)
        return tuple(order)

    def fingerprint(self) -> str:
        """Changes whenever anything that decides attribution changes: the config, and with
        `clusters:` the built-in GPU table it sizes instances by (a type added or corrected there
        recomputes the stored rollups as an edit of `gpus_per_instance` does)."""
        table = gpu_table_digest() if self.clusters is not None else ""
        return hashlib.sha256((self.model_dump_json() + table).encode()).hexdigest()[:16]
