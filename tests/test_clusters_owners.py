"""A finding's owner is looked up through the same attribution (attribute_resources), which
reads no job records: virtual-tag rules on a job's own fields (job_name, partition, qos,
namespace) must match nothing there rather than break the statement (the demo's config has
such rules, and its rules run looked up owners with them)."""

from __future__ import annotations

from service.attribution import attribute_resources
from tests.attribution_helpers import config, line, make_lake

ATTRIBUTION = {
    "clusters": {"node_tag": "slurm-node", "cluster_tag": "cluster"},
    "dimensions": {"team": {"tags": ["team"]},
                   "job_type": {"rules": [{"match": {"partition": "debug"}, "value": "debug"},
                                          {"match": {"job_name": "^eval"}, "value": "eval"},
                                          {"match": {"account": "111111111111"}, "value": "pretrain"}]}},
}


def test_owners_of_resources_with_rules_on_job_fields(tmp_path):
    lake = make_lake(tmp_path, [line("2026-11-02T03:00:00", "10", resource="i-0abc", instance_type="p5.48xlarge",
                                     tags={"team": "nlp", "cluster": "p5-west", "slurm-node": "p5-001"})])
    owners = attribute_resources(lake, config(ATTRIBUTION, lake), ["i-0abc"])
    assert owners["i-0abc"]["team"] == "nlp"
    assert owners["i-0abc"]["job_type"] == "pretrain"  # the job-field rules match no cost line; the account rule does
