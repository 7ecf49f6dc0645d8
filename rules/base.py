"""Rules and findings; the registry (service/core/registry.py) finds rules by kebab-case name.

A rule is one small class in its own module: a typed config model (the only place its
defaults live), the lake tables and columns it reads, and `evaluate(ctx) -> list[Finding]`.
It reads through the sandboxed DuckDB connection in the `RuleContext` and returns
findings; it never prints, writes or touches metrics. The engine (rules/engine.py) keeps
ids stable, tracks first/last seen and resolution; the service fills in owners.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field, ValidationError

from service.core.config import Strict
from service.core.errors import ConfigError
from service.core.registry import RULE_CATEGORIES, RULES, Configured
from service.core.units import cents, usd  # noqa: F401 (usd: the rules' money format)
from service.core.validation import plain_errors

from rules.context import RuleContext

Severity = Literal["info", "warning", "critical"]
Status = Literal["open", "resolved", "acknowledged"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "critical")
# What kind of money a finding is about, in the order they are listed. `waste` is spend that
# buys nothing (its `monthly_waste_usd` is what it costs a month); `overspend` is spend above
# a budget or an expectation; `ownership` is spend nobody owns. Waste totals never mix them.
Category = Literal["waste", "overspend", "ownership"]
CATEGORIES: tuple[Category, ...] = RULE_CATEGORIES  # the registry refuses a rule declaring another
NO_OWNER = ""  # a finding's owner its rule did not name: fill_owners names it (a team may be called `unallocated`)
HOURS_PER_MONTH = Decimal("730")  # 365 × 24 / 12, the convention of cloud price lists


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One thing a rule found, on one resource. `id` = hash(rule, resource_id, key).

    `impact_usd` is the money at stake, as its rule's docstring defines it; `monthly_waste_usd`
    is set for `waste` findings only (and equals their impact), None for the other categories.
    """

    id: str
    rule: str
    category: Category
    severity: Severity
    resource_id: str
    team: str = NO_OWNER
    project: str = NO_OWNER
    experiment: str = NO_OWNER
    impact_usd: Decimal
    monthly_waste_usd: Decimal | None = None
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    status: Status = "open"
    acknowledged_at: datetime | None = None
    ack_reason: str | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"finding {self.id}: category {self.category!r} is not one of {', '.join(CATEGORIES)}")
        if (self.monthly_waste_usd is not None) != (self.category == "waste"):
            raise ValueError(f"finding {self.id}: monthly_waste_usd is for waste findings only, and every "
                             f"waste finding has one (category {self.category})")


def finding_id(rule: str, resource_id: str, key: str) -> str:
    """Stable across runs: the same rule, resource and key always give the same id."""
    digest = hashlib.sha256("\x1f".join((rule, resource_id, key)).encode()).hexdigest()
    return digest[:16]


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"evidence value of type {type(value).__name__} is not JSON-able")


money = cents  # a finding's USD: rounded half-up to the cent (service.core.units)


def glob_regex(patterns: Sequence[str], *, path_component: bool = False) -> str:
    """Shell-style globs (`*`, `?`) → one RE2 alternation. In a path component `*` stops at `/`."""
    star, one = ("[^/]*", "[^/]") if path_component else (".*", ".")
    parts = ["".join(star if ch == "*" else one if ch == "?" else re.escape(ch) for ch in p) for p in patterns]
    return "(?:" + "|".join(parts) + ")"


class RuleConfig(Strict):
    """Settings every rule has. A rule's own model adds its thresholds with defaults."""

    enabled: bool = True
    critical_monthly_usd: Decimal = Field(default=Decimal("1000"), ge=0,
                                          description="findings with at least this much at stake (for waste: a month) are critical")

    def doubts(self) -> list[tuple[str, str]]:
        """(key, why) for each percentage (a `_pct` key) set between 0 and 1: likely a fraction
        written where a percent is meant (`sm_active_max_pct: 0.05` for 5 %). `config validate`
        says it; it is not refused, as 0.5 % may be meant."""
        doubts = []
        for key in sorted(self.model_fields_set):
            number = getattr(self, key)  # an optional key set to null, or a plug-in's own type, is no percentage
            if not key.endswith("_pct") or isinstance(number, bool) or not isinstance(number, (int, float, Decimal)):
                continue
            if 0 < (value := Decimal(str(number))) < 1:
                percent = format((value * 100).normalize(), "f")
                doubts.append((key, f"{value} is a percentage, {value} %; write {percent} if {percent} % is meant"))
        return doubts


RuleConfigT = TypeVar("RuleConfigT", bound=RuleConfig)


class Rule(Configured[RuleConfigT]):
    """Subclass as `Rule[ItsConfig]` (that declares `config_model = ItsConfig`; a rule with no
    settings of its own has RuleConfig), set `name`, `category` and `inputs`, implement `evaluate`."""

    name: ClassVar[str]
    category: ClassVar[Category]  # what kind of money its findings are about (CATEGORIES)
    config_model: ClassVar[type[RuleConfig]] = RuleConfig
    # table → the columns the rule reads (service.core.schema has their types). A table
    # that is not in the lake yet skips the rule; a missing column is an error.
    inputs: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init__(self, config: RuleConfigT | None = None):
        self.config = config if config is not None else self.config_model()

    @classmethod
    def configured(cls, rules: Mapping) -> Rule:
        """The rule as a config's `rules:` section sets it (its defaults where the section does not
        name it), for a reader outside the rules run that counts as the rule does."""
        return cls(cls.config_model.model_validate(rules.get(cls.name) or {}))

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        raise NotImplementedError

    def severity(self, monthly_usd: Decimal, default: Severity = "warning") -> Severity:
        return "critical" if monthly_usd >= self.config.critical_monthly_usd > 0 else default

    def finding(self, *, resource_id: str, key: str, severity: Severity, impact_usd: Decimal | int,
                summary: str, evidence: Mapping[str, Any]) -> Finding:
        """A finding of this rule's category; a waste rule's impact is its monthly waste."""
        impact = money(impact_usd)
        return Finding(
            id=finding_id(self.name, resource_id, key), rule=self.name, category=self.category, severity=severity,
            resource_id=resource_id, impact_usd=impact, monthly_waste_usd=impact if self.category == "waste" else None,
            summary=summary, evidence=json.loads(json.dumps(dict(evidence), default=_jsonable)),
        )

    @classmethod
    def stored_impact(cls, monthly_waste_usd: Decimal, evidence: Mapping[str, Any]) -> Decimal:
        """The impact of a finding stored before findings had one (its old `monthly_waste_usd`,
        which meant the same for every rule but unallocated-spend, which says otherwise)."""
        return monthly_waste_usd

    @classmethod
    def projected(cls, evidence: Mapping[str, Any]) -> bool:
        """Whether a waste finding's `monthly_waste_usd` is what it costs a month while it goes on
        (True) or a finished cost, counted once and never projected (a failed attempt, a Capacity Block)."""
        return True


def finished_cost(finding: Finding) -> bool:
    """A waste finding whose money is a finished cost, not a month's (its rule's `projected`)."""
    rule = registered().get(finding.rule)
    return finding.category == "waste" and rule is not None and not rule.projected(finding.evidence)


def waste_per(finding: Finding) -> str:
    """What a waste finding's money is per, as tables say it beside the amount."""
    return "once" if finished_cost(finding) else "a month"


# ---- the registry: entry-point group `spendlake.rules` (service/core/registry.py) ----------

def registered() -> dict[str, type[Rule]]:
    """Every installed rule by name. One whose package cannot be loaded is left out here
    (the registry logs why) and named by `configure` when the config sets it."""
    loaded, _ = RULES.load_all()
    return dict(sorted(loaded.items()))


def configure(raw: Mapping[str, Any], *, file: str = "<config>") -> list[Rule]:
    """Every registered rule with its validated config (the `rules:` section of the YAML).

    Errors carry dotted paths such as `rules.idle-gpu.sm_active_max_pct`; unknown rule
    names are rejected.
    """
    loaded, broken = RULES.load_all()
    known = dict(sorted(loaded.items()))
    errors = []
    for name in raw:
        if name in broken:
            errors.append(f"rules.{name}: {broken[name].message}")
        elif name not in known:
            errors.append(f"rules.{name}: unknown rule; known rules: {', '.join(known)}")
    rules = []
    for name, cls in known.items():
        section = raw.get(name) or {}
        if not isinstance(section, Mapping):
            errors.append(f"rules.{name}: must be a mapping of settings")
            continue
        try:
            rules.append(cls(cls.config_model.model_validate(section)))
        except ValidationError as exc:
            errors += [f"{path}: {message}" for path, message in plain_errors(
                exc, section, prefix=("rules", name),
                unknown_key="unknown key; see the rule's documented settings (`spendlake rules list`)")]
    if errors:
        raise ConfigError("; ".join(errors), where=file, hint="fix the config and run `spendlake config validate`")
    return rules
