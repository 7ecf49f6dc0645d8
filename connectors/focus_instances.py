"""The instance type of a FOCUS cost line, from what each producer writes: the lake's
`x_instance_type` (what shared GPU clusters allocate by: service/attribution/allocation.py).

FOCUS has no instance type column; producers give it in three places:

- FOCUS 1.2+ `SkuPriceDetails`, whose FOCUS-defined properties include `InstanceType`
  (`{"InstanceType": "p5.48xlarge", "CoreCount": 192, ...}`), any producer;
- Microsoft's FOCUS export: `x_SkuDetails` (read as SkuPriceDetails) is the cost details'
  AdditionalInfo, where a virtual machine's line has its size as `ServiceType` beside its `VCPUs`
  (`{"UsageType": "ComputeHR", "ServiceType": "Standard_ND96isr_H100_v5", "VCPUs": 96, ...}`);
  other services use ServiceType for other things (`"ServiceType": "Gateway"`), without VCPUs;
- AWS's FOCUS export (Data Exports): the usage type, `x_UsageType` in FOCUS 1.0 and `SkuMeter`
  in 1.2 (AWS moved it there), names the type of an instance-hour: `[<region code>-]BoxUsage:`,
  `SpotUsage:`, `DedicatedUsage:`, and an unused capacity reservation's `UnusedBox:`/`UnusedDed:`
  (`USE1-BoxUsage:p5.48xlarge`; us-east-1 has no region code). These are the lines a CUR's
  `product_instance_type` marks as instance time; an RI fee (`HeavyUsage:`) is no instance's hour.

The first that names one counts. Google's FOCUS export bills a VM's cores, memory and GPUs as
separate SKUs and names no machine type, so its lines reach jobs only where the file has one of these.
"""

from __future__ import annotations

from connectors.exportfile import Table, json_text, sql_string, text

USAGE_TYPE_COLUMNS = ("x_UsageType", "x_usage_type", "SkuMeter")
SKU_DETAILS_COLUMNS = ("SkuPriceDetails", "x_SkuDetails")
# the usage types of an EC2 instance-hour, with the type after the colon
INSTANCE_HOUR = r"^(?:[A-Z]+[0-9]*-)?(?:BoxUsage|SpotUsage|DedicatedUsage|UnusedBox|UnusedDed):([a-z0-9-]+\.[a-z0-9-]+)$"


def instance_type(table: Table) -> str | None:
    """SQL of a line's instance type (the module's order), or None when the file can name none."""
    choices = [text(table, "x_instance_type"), _from_sku_details(table), _from_usage_type(table)]
    present = [sql for sql in choices if sql]
    if not present:
        return None
    return present[0] if len(present) == 1 else f"coalesce({', '.join(present)})"


def _from_sku_details(table: Table) -> str | None:
    details = json_text(table, *SKU_DETAILS_COLUMNS)
    if details is None:
        return None
    return (f"CASE WHEN json_valid({details}) THEN coalesce(json_extract_string({details}, '$.InstanceType'), "
            f"CASE WHEN json_exists({details}, '$.VCPUs') THEN json_extract_string({details}, '$.ServiceType') END) END")


def _from_usage_type(table: Table) -> str | None:
    usage_types = [sql for name in USAGE_TYPE_COLUMNS if (sql := text(table, name))]
    if not usage_types:
        return None
    usage = usage_types[0] if len(usage_types) == 1 else f"coalesce({', '.join(usage_types)})"
    return f"NULLIF(regexp_extract({usage}, {sql_string(INSTANCE_HOUR)}, 1), '')"
