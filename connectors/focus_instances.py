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
    return _first([sql for sql in (text(table, "x_instance_type"), _from_sku_details(table), _from_usage_type(table))
                   if sql])


def _from_sku_details(table: Table) -> str | None:
    """Each SKU details column the file has (Microsoft's may carry both), the first naming one."""
    found = []
    for column in SKU_DETAILS_COLUMNS:
        if (details := json_text(table, column)) is not None:
            found.append(f"CASE WHEN json_valid({details}) THEN coalesce("
                         f"json_extract_string({details}, '$.InstanceType'), CASE WHEN json_exists({details}, "
                         f"'$.VCPUs') THEN json_extract_string({details}, '$.ServiceType') END) END")
    return _first(found)


def _from_usage_type(table: Table) -> str | None:
    usage = _first([sql for name in USAGE_TYPE_COLUMNS if (sql := text(table, name))])
    return usage and f"NULLIF(regexp_extract({usage}, {sql_string(INSTANCE_HOUR)}, 1), '')"


def _first(values: list[str]) -> str | None:
    """SQL of the first of `values` not null; None for none."""
    if not values:
        return None
    return values[0] if len(values) == 1 else f"coalesce({', '.join(values)})"
