"""A rollup's lines summed before their values are decided (service/attribution/sql.py
`attributed_sql`, `grouped`): what the dimensions and shared rules read of a line is all a
rollup keeps of it, and the bench's month of 10M lines has about 69,000 of those. Without
allocation the lines are grouped as read (`grouped_lines`); with it, those allocation does not
split, beside its parts (`grouped_steps`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from service.attribution.allocation import INSTANCE_ID, INSTANCE_LINE, Stage, part_columns
from service.core.config_attribution import MATCH_FIELDS, AttributionConfig
from service.core.config_clusters import JOB_MATCH_FIELDS


def rule_fields(config: AttributionConfig, order: Sequence[str]) -> list[str]:
    """The cost columns the rules of the dimensions `order` and the shared rules match on."""
    rules = [*(r for name in order for r in config.dimensions[name].rules), *config.shared]
    return [MATCH_FIELDS[key] for rule in rules for key in rule.match if key in MATCH_FIELDS]


def grouped_lines(where: str, tags: list[str], read: list[str], sums: list[str]) -> str:
    """`grouped_lines` CTE, without allocation: the cost lines matching `where` summed (the
    columns `sums`; their count in `a_lines`) as read, per charge period, currency, value of
    each tag in `tags` (`Tags[key]` markers, as `g_<n>`, untrimmed) and column in `read`.
    Trimming and deciding per group, not per line, saves a third of the rollup's CPU on a
    month of 10M lines (bench/README.md). `tags` empty and `Tags` in `read`: by the whole tag
    map (rollup.py `groups_by_tag_map` says when: a tag per resource, a Name, would make each
    line its own group, at twice the CPU of deciding each line)."""
    keys = ["ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "BillingCurrency", *read]
    picks = [*keys, *(f"{tag} AS g_{n}" for n, tag in enumerate(tags)), *(f"sum({c}) AS {c}" for c in sums)]
    return (f"grouped_lines AS (SELECT {', '.join(picks)}, count(*) AS a_lines FROM costs WHERE {where} "
            f"GROUP BY {', '.join([*keys, *tags])}), ")


# The lines `tag_map_groups_sql` judges a period by: 0.04 CPU s of the bench's 10M-line month.
HEAD_LINES = 65536


def tag_map_groups_sql(keys: int) -> str:
    """How many groups the first HEAD_LINES lines of the period ($source, $period) of `costs`
    make by charge period and currency and the whole Tags map, and how many by those and the
    values of the `keys` tag keys read ($k0, $k1, ...): `grouped_lines`' two ways."""
    by = "ChargePeriodStart, ChargePeriodEnd, BillingPeriodStart, BillingCurrency"
    values = "".join(f", Tags[$k{n}]" for n in range(keys))
    return (f"WITH head AS MATERIALIZED (SELECT {by}, Tags FROM costs WHERE source = $source AND "
            f"billing_period = $period LIMIT {HEAD_LINES}) "
            f"SELECT (SELECT count(*) FROM (SELECT DISTINCT {by}, Tags FROM head)), "
            f"(SELECT count(*) FROM (SELECT DISTINCT {by}{values} FROM head))")


def kept_by_map(steps: list[str], where: str, period: Sequence[str], read: Sequence[str],
                measures: Mapping[str, str], stage: Stage, tag_reads: Mapping[str, str],
                inventory: Sequence[str]) -> str:
    """Append `a_km`: the lines allocation does not split (none of its members' instance lines)
    summed as read by charge period, currency, the columns `read` and the whole Tags map, and
    `a_kt`: those groups with the tag columns `tag_reads` and `inventory` (the `inv` CTE's,
    joined on ResourceId, which `read` then holds). Returns `a_kt`, holding `a_lines`, for
    `grouped_steps`: each line's tags are looked up once per group, not per line."""
    picks = ", ".join([*period, *dict.fromkeys(["source", "billing_period", *read, "ResourceId", "x_instance_type",
                                                "x_split_parent_resource_id", "Tags"]), *measures.values()])
    member = f"{INSTANCE_LINE} AND {INSTANCE_ID} IN (SELECT a_instance FROM {stage.members})"
    keys = ["cp_start", "cp_end", "currency", "source", "billing_period", *read, "Tags"]
    sums = [f"sum({c}) AS {c}" for c in measures]
    steps.append(f"a_km AS (SELECT {', '.join([*keys, *sums])}, count(*) AS a_lines FROM (SELECT {picks} "
                 f"FROM costs WHERE {where}) AS l WHERE NOT coalesce({member}, false) GROUP BY {', '.join(keys)})")
    tags = "".join(f", {value} AS {column}" for column, value in tag_reads.items())
    join = " LEFT JOIN inv ON inv.rid = a_km.ResourceId" if inventory else ""
    steps.append(f"a_kt AS (SELECT a_km.*{tags}{''.join(f', {c}' for c in inventory)}, "
                 f"{', '.join(f'CAST(NULL AS VARCHAR) AS {c}' for c in JOB_MATCH_FIELDS.values())} FROM a_km{join})")
    return "a_kt"


def grouped_steps(steps: list[str], config: AttributionConfig, order: Sequence[str],
                  tag_columns: Sequence[str], measures: Sequence[str], kept: str | None = None,
                  placed: bool = False) -> str:
    """Append `s0g`: the lines allocation does not split (`a_keep`), summed by what the
    dimensions' values and the shared rules read of them (the bench's 10M lines: 60,315
    groups), and `s0u`: those and the parts (sql.py `attributed_sql`, `grouped` with allocation;
    `measures`: the cost columns). Returns the step the dimensions read. (Without allocation
    the lines are grouped as read: `grouped_lines`.) `kept`: the step holding those lines already
    summed (`kept_by_map`; their counts in `a_lines`). `placed`: the parts carry their
    ResourceId and ChargeCategory as `a_resource`, `a_category` (NULL on the summed lines)."""
    read = list(dict.fromkeys(["cp_start", "cp_end", "currency", "source", "billing_period", *tag_columns,
                               *rule_fields(config, order),
                               *JOB_MATCH_FIELDS.values()]))  # a job's fields: NULL on these lines
    sums = [f"sum({m}) AS {m}" for m in measures]
    count = "CAST(sum(a_lines) AS BIGINT)" if kept else "count(*)"
    steps.append(f"s0g AS (SELECT {', '.join(read + sums)}, {count} AS a_lines "
                 f"FROM {kept or 'a_keep'} GROUP BY {', '.join(read)})")
    parts = [c for c in part_columns(order) if c not in read]
    nulls = ["CAST(0 AS INTEGER)" if c == "a_overbooked" else "NULL" for c in parts]
    own = ["ResourceId AS a_resource", "ChargeCategory AS a_category"] if placed else []
    nulls += ["CAST(NULL AS VARCHAR)"] * len(own)
    parts += [c.split(" AS ")[1] for c in own]
    steps.append(f"s0u AS (SELECT {', '.join([*read, *measures, 'a_lines'])}, "
                 f"{', '.join(f'{v} AS {c}' for v, c in zip(nulls, parts))} FROM s0g UNION ALL "
                 f"SELECT {', '.join([*read, *measures])}, 1, {', '.join([*parts[:len(parts) - len(own)], *own])} "
                 "FROM a_parts)")
    return "s0u"
