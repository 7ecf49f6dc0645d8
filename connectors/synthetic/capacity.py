"""The demo organisation's On-Demand Capacity Reservation, partly unused (what the
capacity-unused rule flags), added to a built organisation as inject_gpu_anomaly adds a sweep:
two p5.48xlarge held by pretrain for its next run; one instance runs in it, the other slot sits
empty, billed as UnusedBox at the on-demand rate (CUR 2.0 capacity_reservation_* columns)."""

from __future__ import annotations

from decimal import Decimal

from connectors.synthetic.org import ACCOUNTS, INSTANCES, Organisation, Stream, _hex_id, units

INSTANCE, REGION = "p5.48xlarge", "us-east-1"
TAGS = (("team", "pretrain"), ("project", "llama-70b"))


def add_capacity_reservation(org: Organisation) -> str:
    """Add the reservation's streams to `org` for its whole window; returns the reservation's ARN."""
    arn = f"arn:aws:ec2:{REGION}:{ACCOUNTS['training'][0]}:capacity-reservation/cr-0{_hex_id(org.seed, 'odcr')}"
    org.capacity_reservation_arn = arn
    hourly = f"${Decimal(INSTANCES[INSTANCE][0]):f} per"
    common = dict(account="training", product_code="AmazonEC2", servicecode="AmazonEC2",
                  product_name="Amazon Elastic Compute Cloud", product_family="Compute Instance",
                  operation="RunInstances:0002", region=REGION, unit="Hrs", rate=units(INSTANCES[INSTANCE][0]),
                  amount=1.0, start=0, end=org.hours, instance_type=INSTANCE, tags=TAGS, team="pretrain",
                  capacity_reservation_arn=arn)
    org.streams.append(Stream(**common, usage_type=f"BoxUsage:{INSTANCE}", capacity_status="Used",
                              resource_id="i-" + _hex_id(org.seed, "odcr", 0),
                              description=f"{hourly} On Demand Linux {INSTANCE} Instance Hour"))
    org.streams.append(Stream(**common, usage_type=f"UnusedBox:{INSTANCE}", resource_id=arn, capacity_status="Unused",
                              description=f"{hourly} Unused Reservation Linux {INSTANCE} Instance Hour"))
    return arn
