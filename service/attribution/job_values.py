"""A job record's dimension values on its own, without a billed line: what `spendlake runs`
shows for a run whose jobs reached no billed instance (its instance or node is not in the
bill, or its cluster has no pool).

The values are decided as for a job's part of an instance line (service/attribution/allocation.py):
the job's own column (team, project, experiment, job_type, run, job_state, cluster, user), else
its labels and fields through the dimension's tag keys, else the virtual-tag rules, else the
dimension's default. Rules on a cost line's fields (account, service, resource id, usage type,
region, charge category) see no line: they match nothing (as on a line without that field).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.attribution.allocation import JOB_COLUMNS, JOB_FIELD_KEYS, job_label
from service.attribution.needs import needed_dimensions
from service.attribution.sql import case_else, dim_col, rule_condition
from service.attribution.statement import Params
from service.attribution.tag_keys import tag_candidates
from service.core.config_attribution import MATCH_FIELDS, AttributionConfig
from service.core.config_clusters import JOB_MATCH_FIELDS

JOB_FIELDS = {"job_name": "name", "partition": "partition", "qos": "qos", "namespace": "namespace"}


def job_values_ctes(config: AttributionConfig, records: str, label_keys: Sequence[str], dims: Sequence[str],
                    params: Params) -> tuple[str, str]:
    """CTEs (`v0, v1, ...`, to follow `WITH` and the CTE `records` of job rows) adding
    `d_<dim>` for each of `dims` (and the dimensions their rules read) to each row; returns
    the text and the last CTE's name."""
    keys = list(dict.fromkeys([*label_keys, *JOB_FIELD_KEYS]))
    lines = [f"CAST(NULL AS VARCHAR) AS {column}" for column in MATCH_FIELDS.values()]
    fields = [f"CAST(j.{JOB_FIELDS[key]} AS VARCHAR) AS {column}" for key, column in JOB_MATCH_FIELDS.items()]
    steps = [f"v0 AS (SELECT j.*, {', '.join(lines + fields)} FROM {records} AS j)"]
    for i, name in enumerate(needed_dimensions(config, dims), start=1):
        dim = config.dimensions[name]
        values = []
        if name in JOB_COLUMNS:
            values.append(f"nullif(trim(j.{JOB_COLUMNS[name]}), '')")
        values += [job_label(key, params) for key in tag_candidates(dim.tags or (name,), keys)]
        cases = [f"WHEN {value} IS NOT NULL THEN {value}" for value in values]
        cases += [f"WHEN {rule_condition(rule.match, params)} THEN {params.bind(rule.value.strip())}"
                  for rule in dim.rules]
        steps.append(f"v{i} AS (SELECT j.*, {case_else(cases, params.bind(dim.default.strip()))} AS {dim_col(name)} "
                     f"FROM v{i - 1} AS j)")
    return ", ".join(steps), f"v{len(steps) - 1}"
