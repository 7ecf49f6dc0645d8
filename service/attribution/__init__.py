"""Attribution: every dollar of the lake on one value per dimension, exactly once.

The package's public API — every other package imports attribution from here, never from
its modules (tests/test_layout.py):

- `attribute`, `AttributionResult`, `AttributionRow`, `Contribution`: attributed cost of a
  window (service/attribution/api.py describes how a line gets its values);
- `reconcile`, `Reconciliation`: Σ attributed against Σ source, per billing period;
- `materialise`: compute missing per-period rollups now (ingest calls it after committing);
- `attribute_resources`: each dimension's value on a resource's latest cost line (owners);
- `parse_where`: `team=nlp` options as a filter;
- `direct_daily_lookup`: what rules read, direct spend per day (service/attribution/lines.py
  says what it leaves out and why).
"""

from service.attribution.api import (
    AttributionResult, AttributionRow, Contribution, Reconciliation, attribute, attribute_resources, materialise,
    parse_where, reconcile,
)
from service.attribution.lines import direct_daily_lookup

__all__ = [
    "AttributionResult", "AttributionRow", "Contribution", "Reconciliation", "attribute", "attribute_resources",
    "direct_daily_lookup", "materialise", "parse_where", "reconcile",
]
