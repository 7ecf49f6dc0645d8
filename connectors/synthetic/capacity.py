"""The demo organisation's capacity reservation, partly unused (what the capacity-unused rule
flags): built with the organisation, after its other streams (connectors.synthetic.org)."""

from __future__ import annotations

from decimal import Decimal

from connectors.synthetic.org import ACCOUNTS, INSTANCES, _Builder, _hex_id, units


def capacity_reservation(builder: _Builder) -> None:
    """An On-Demand Capacity Reservation for two p5.48xlarge held by pretrain for its next run:
    one instance runs in it, the other slot sits empty, billed as UnusedBox at the on-demand
    rate (what the capacity-unused rule flags)."""
    instance, region = "p5.48xlarge", "us-east-1"
    price = units(INSTANCES[instance][0])
    arn = (f"arn:aws:ec2:{region}:{ACCOUNTS['training'][0]}:capacity-reservation/"
           f"cr-0{_hex_id(builder.org.seed, 'odcr')}")
    builder.org.capacity_reservation_arn = arn
    tags, team = builder.tags("pretrain", "llama-70b", None, True)
    common = dict(account="training", product_code="AmazonEC2", servicecode="AmazonEC2",
                  product_name="Amazon Elastic Compute Cloud", product_family="Compute Instance",
                  operation="RunInstances:0002", region=region, unit="Hrs", rate=price, amount=1.0, start=0,
                  end=builder.hours, instance_type=instance, tags=tags, team=team, capacity_reservation_arn=arn)
    hourly = f"${Decimal(INSTANCES[instance][0]):f} per"
    builder.add(**common, usage_type=f"BoxUsage:{instance}", resource_id="i-" + _hex_id(builder.org.seed, "odcr", 0),
                capacity_status="Used", description=f"{hourly} On Demand Linux {instance} Instance Hour")
    builder.add(**common, usage_type=f"UnusedBox:{instance}", resource_id=arn, capacity_status="Unused",
                description=f"{hourly} Unused Reservation Linux {instance} Instance Hour")
