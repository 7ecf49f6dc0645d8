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
  in 1.2 (AWS moved it there), names the type of an instance-hour: `[<region code>-[<Local Zone>-]]BoxUsage:`,
  `SpotUsage:`, `DedicatedUsage:`, and an unused capacity reservation's `UnusedBox:`/`UnusedDed:`
  (`USE1-BoxUsage:p5.48xlarge`; us-east-1 has no region code). These are the lines a CUR's
  `product_instance_type` marks as instance time; an RI fee (`HeavyUsage:`) is no instance's hour.

The first that names one counts. Google's FOCUS export bills a VM's cores, memory and GPUs as
separate SKUs and names no machine type, so its lines reach jobs only where the file has one of these.
"""

from __future__ import annotations

from collections.abc import Callable

from connectors.exportfile import Table, ident, json_text, sql_string

# AWS's usage type, in the order connectors/focus.py reads it as the lake's (which adds Microsoft's FOCUS 1.0
# x_SkuMeterName: a meter name names no instance type)
USAGE_TYPE_COLUMNS = ("x_UsageType", "x_usage_type", "SkuMeter")
SKU_DETAILS_COLUMNS = ("SkuPriceDetails", "x_SkuDetails")
# the usage types of an EC2 instance-hour, with the type after the colon; up to two prefix parts, a region's and
# a Local Zone's (`USW2-LAX1-BoxUsage:g4dn.xlarge`: the form recalled from AWS's price list, unverified against a
# real bill or AWS's documentation; a line of another form gets no instance type and stays a cluster's unallocated)
INSTANCE_HOUR = r"^(?:[A-Z]+[0-9]*-){0,2}(?:BoxUsage|SpotUsage|DedicatedUsage|UnusedBox|UnusedDed):([a-z0-9-]+\.[a-z0-9-]+)$"


def instance_type(table: Table) -> str | None:
    """SQL of a line's instance type (the module's order), or None when the file can name none."""
    found = [read(text) for _name, text, read in _sources(table)]
    if not found:
        return None
    return found[0] if len(found) == 1 else f"coalesce({', '.join(found)})"


def instance_type_per_value(table: Table) -> tuple[str, str] | None:
    """(the text, SQL over it as `value`) for the stager to read once per distinct text
    (service.core.per_value: AWS's FOCUS 1.0 export has a few dozen usage types per million lines,
    and the regular expression on each line cost 0.2 CPU s per million), when one text column
    names the type; None otherwise (several are read per line)."""
    sources = _sources(table)
    if len(sources) != 1 or sources[0][2] is _as_written or str(table.type_of(sources[0][0])) != "VARCHAR":
        return None
    name, _text, read = sources[0]
    return ident(name), read(f"nullif({ident('value')}, '')")


def _sources(table: Table) -> list[tuple[str, str, Callable[[str], str]]]:
    """The file's columns naming an instance type, in order: (column, its text, the type read from a text)."""
    found: list[tuple[str, str, Callable[[str], str]]] = []
    if name := table.name("x_instance_type"):
        found.append((name, table.text(name), _as_written))
    for column in SKU_DETAILS_COLUMNS:  # Microsoft's export may carry both
        if name := table.name(column):
            found.append((name, json_text(table, name), _from_sku_details))
    for column in USAGE_TYPE_COLUMNS:
        if name := table.name(column):
            found.append((name, table.text(name), _from_usage_type))
    return found


def _as_written(value: str) -> str:
    return value


def _from_sku_details(details: str) -> str:
    return (f"CASE WHEN json_valid({details}) THEN coalesce(json_extract_string({details}, '$.InstanceType'), "
            f"CASE WHEN json_exists({details}, '$.VCPUs') THEN json_extract_string({details}, '$.ServiceType') END) END")


def _from_usage_type(usage: str) -> str:
    return f"NULLIF(regexp_extract({usage}, {sql_string(INSTANCE_HOUR)}, 1), '')"
