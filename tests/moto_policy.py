"""An IAM policy as moto's IAM simulation needs it to allow what real AWS allows: the same
statements, each action also under the names moto checks.

- moto evaluates `<SigV4 signing name>:<operation>`; for these services that name differs from
  the IAM service prefix real AWS checks (tag:GetResources is signed as "tagging").
- moto 5.2.6 checks an S3 call under its operation's name (`s3:ListObjectsV2`, `s3:HeadObject`,
  `s3:GetBucketLifecycleConfiguration`) where AWS checks the IAM action (`s3:ListBucket`,
  `s3:GetObject`, `s3:GetLifecycleConfiguration`), as moto 5.2.5 did: an allowed IAM action also
  allows the operations it covers."""

from __future__ import annotations

import copy

MOTO_SIGNING_NAMES = {"tag": "tagging", "cloudwatch": "monitoring"}
MOTO_OPERATION_NAMES = {"s3:ListBucket": ("s3:ListObjectsV2", "s3:ListObjects"),
                        "s3:GetObject": ("s3:HeadObject",),
                        "s3:GetLifecycleConfiguration": ("s3:GetBucketLifecycleConfiguration",)}


def as_moto_sees_it(policy: dict) -> dict:
    """The same policy, with each action also under moto's names for it."""
    policy = copy.deepcopy(policy)
    for statement in policy["Statement"]:
        names = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        signed = [f"{MOTO_SIGNING_NAMES[n.split(':')[0]]}:{n.split(':')[1]}"
                  for n in names if n.split(":")[0] in MOTO_SIGNING_NAMES]
        statement["Action"] = names + signed + [alias for n in names for alias in MOTO_OPERATION_NAMES.get(n, ())]
    return policy
