"""A rollup's lines summed before their values are decided (service/attribution/sql.py
`attributed_sql`, `grouped`): what the dimensions and shared rules read of a line is all a
rollup keeps of it, and the bench's month of 10M lines has about 69,000 of those."""

from __future__ import annotations

from collections.abc import Sequence

from service.core.config_attribution import MATCH_FIELDS, AttributionConfig


def rule_fields(config: AttributionConfig, order: Sequence[str]) -> list[str]:
    """The cost columns the rules of the dimensions `order` and the shared rules match on."""
    rules = [*(r for name in order for r in config.dimensions[name].rules), *config.shared]
    return [MATCH_FIELDS[key] for rule in rules for key in rule.match if key in MATCH_FIELDS]


def grouped_lines(where: str, tags: list[str], read: list[str], sums: list[str]) -> str:
    """`grouped_lines` CTE, without allocation: the cost lines matching `where` summed (the
    columns `sums`; their count in `a_lines`) as read, per charge period, currency, value of
    each tag in `tags` (`Tags[key]` markers, as `g_<n>`, untrimmed) and column in `read`.
    Trimming and deciding per group, not per line, saves a third of the rollup's CPU on a
    month of 10M lines (bench/README.md). Not by the whole tag map: a tag per resource (a
    Name) would make each line its own group, at twice the CPU of deciding each line."""
    keys = ["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "BillingCurrency", *read]
    picks = [*keys, *(f"{tag} AS g_{n}" for n, tag in enumerate(tags)), *(f"sum({c}) AS {c}" for c in sums)]
    return (f"grouped_lines AS (SELECT {', '.join(picks)}, count(*) AS a_lines FROM costs WHERE {where} "
            f"GROUP BY {', '.join([*keys, *tags])}), ")
