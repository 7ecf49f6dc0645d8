"""Canonical tables of the lake. FOCUS names, plus `x_` columns for what FOCUS lacks.

Money is DECIMAL(38,12): exact, and wide enough that `1e16 + 1 - 1e16` is 1. Times are
naive TIMESTAMPs that mean UTC. Tags keep their original keys and values in a map;
normalisation happens in attribution, so fixing a rule corrects history.
"""

from __future__ import annotations

from collections.abc import Iterable

MONEY = "DECIMAL(38,12)"
# FOCUS quantities (Consumed, Pricing, CommitmentDiscount) are Decimal too; 16 places keep a
# GB-month of a small object (1.4e-9) exact, 22 integer digits hold any byte count.
QUANTITY = "DECIMAL(38,16)"
# FOCUS JSON columns other than the tag maps are kept as the JSON text the source wrote.
JSON_TEXT = "VARCHAR"
TAG_MAP = "MAP(VARCHAR, VARCHAR)"

# FOCUS's ChargeCategory values, in its spelling (every connector writes one of them).
CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")

# (column, DuckDB type) in file order. Connectors must produce exactly these columns.
# Every FOCUS 1.2 Cost and Usage column, then the 1.3 and 1.4 additions, then `x_` columns for what
# FOCUS lacks. Types are FOCUS's: Decimal → MONEY (costs, unit prices) or QUANTITY,
# DateTime → TIMESTAMP (UTC), JSON → the text (Tags and AllocatedTags: a map, like Tags).
FOCUS_1_2_COLUMNS: tuple[tuple[str, str], ...] = (
    ("BillingAccountId", "VARCHAR"),
    ("BillingAccountName", "VARCHAR"),
    ("BillingAccountType", "VARCHAR"),
    ("BillingPeriodStart", "TIMESTAMP"),
    ("BillingPeriodEnd", "TIMESTAMP"),
    ("ChargePeriodStart", "TIMESTAMP"),
    ("ChargePeriodEnd", "TIMESTAMP"),
    ("BilledCost", MONEY),
    ("EffectiveCost", MONEY),
    ("ListCost", MONEY),
    ("ContractedCost", MONEY),
    ("BillingCurrency", "VARCHAR"),
    ("ChargeCategory", "VARCHAR"),
    ("ChargeClass", "VARCHAR"),
    ("ChargeDescription", "VARCHAR"),
    ("ChargeFrequency", "VARCHAR"),
    ("ProviderName", "VARCHAR"),
    ("PublisherName", "VARCHAR"),
    ("InvoiceIssuerName", "VARCHAR"),
    ("ServiceName", "VARCHAR"),
    ("ServiceCategory", "VARCHAR"),
    ("ServiceSubcategory", "VARCHAR"),
    ("ResourceId", "VARCHAR"),
    ("ResourceName", "VARCHAR"),
    ("ResourceType", "VARCHAR"),
    ("RegionId", "VARCHAR"),
    ("RegionName", "VARCHAR"),
    ("AvailabilityZone", "VARCHAR"),
    ("SubAccountId", "VARCHAR"),
    ("SubAccountName", "VARCHAR"),
    ("SubAccountType", "VARCHAR"),
    ("SkuId", "VARCHAR"),
    ("SkuMeter", "VARCHAR"),
    ("SkuPriceId", "VARCHAR"),
    ("SkuPriceDetails", JSON_TEXT),
    ("PricingCategory", "VARCHAR"),
    ("PricingQuantity", QUANTITY),
    ("PricingUnit", "VARCHAR"),
    ("ListUnitPrice", MONEY),
    ("ContractedUnitPrice", MONEY),
    ("PricingCurrency", "VARCHAR"),
    ("PricingCurrencyListUnitPrice", MONEY),
    ("PricingCurrencyContractedUnitPrice", MONEY),
    ("PricingCurrencyEffectiveCost", MONEY),
    ("ConsumedQuantity", QUANTITY),
    ("ConsumedUnit", "VARCHAR"),
    ("CommitmentDiscountId", "VARCHAR"),
    ("CommitmentDiscountName", "VARCHAR"),
    ("CommitmentDiscountCategory", "VARCHAR"),
    ("CommitmentDiscountType", "VARCHAR"),
    ("CommitmentDiscountStatus", "VARCHAR"),
    ("CommitmentDiscountQuantity", QUANTITY),
    ("CommitmentDiscountUnit", "VARCHAR"),
    ("CapacityReservationId", "VARCHAR"),
    ("CapacityReservationStatus", "VARCHAR"),
    ("InvoiceId", "VARCHAR"),
    ("Tags", TAG_MAP),
)
FOCUS_1_3_ADDITIONS: tuple[tuple[str, str], ...] = (
    ("ServiceProviderName", "VARCHAR"),  # replaces ProviderName (deprecated in 1.3)
    ("HostProviderName", "VARCHAR"),
    ("ContractApplied", JSON_TEXT),
    ("AllocatedMethodId", "VARCHAR"),
    ("AllocatedMethodDetails", JSON_TEXT),
    ("AllocatedResourceId", "VARCHAR"),
    ("AllocatedResourceName", "VARCHAR"),
    ("AllocatedTags", TAG_MAP),
)
FOCUS_1_4_ADDITIONS: tuple[tuple[str, str], ...] = (
    ("InvoiceDetailId", "VARCHAR"),  # the invoice_details row this charge is billed on
    ("CommitmentProgramEligibilityDetails", JSON_TEXT),
)
EXTENSION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("x_line_item_type", "VARCHAR"),
    ("x_usage_type", "VARCHAR"),
    ("x_instance_type", "VARCHAR"),
    ("x_operation", "VARCHAR"),
    ("x_credits", MONEY),
    # AWS: `ODCR` or `EC2 Capacity Blocks for ML` (FOCUS has no column for the kind of reservation)
    ("x_capacity_reservation_type", "VARCHAR"),
    # when the line's commitment (Savings Plan, reservation) began and ends: FOCUS cost rows do not say
    ("x_commitment_start", "TIMESTAMP"),
    ("x_commitment_end", "TIMESTAMP"),
    # AWS split cost allocation data (CUR `split_line_item_*`, EKS pods and ECS tasks): on a
    # pod's row, the EC2 instance it ran on, its share of that instance's cost and its share
    # of the instance's unused cost (amortized, as AWS computes them); NULL on other rows.
    ("x_split_parent_resource_id", "VARCHAR"),
    ("x_split_cost", MONEY),
    ("x_split_unused_cost", MONEY),
)
COST_COLUMNS: tuple[tuple[str, str], ...] = (FOCUS_1_2_COLUMNS + FOCUS_1_3_ADDITIONS + FOCUS_1_4_ADDITIONS
                                              + EXTENSION_COLUMNS)

COST_COLUMN_NAMES = tuple(name for name, _ in COST_COLUMNS)
JSON_COLUMNS = ("SkuPriceDetails", "ContractApplied", "AllocatedMethodDetails", "CommitmentProgramEligibilityDetails")
COST_TYPES = dict(COST_COLUMNS)

# A line's unit price × pricing quantity in money (NULL when it would not fit), computed once per
# line of the bill and carried beside its columns where lines are split into parts (`export
# --with-attribution`): each part carries its exact share of the line's, so the ListCost and
# ContractedCost an export derives from them (service/export/focus.py) add up to the line's.
LINE_PRODUCTS = {"line_list_product": ("ListUnitPrice", "PricingQuantity"),
                 "line_contracted_product": ("ContractedUnitPrice", "PricingQuantity")}


def line_products_sql() -> dict[str, str]:
    """LINE_PRODUCTS' column → its SQL over a line's cost columns."""
    return {name: f"try(CAST({price} * {quantity} AS {MONEY}))" for name, (price, quantity) in LINE_PRODUCTS.items()}


# A line's place in the BilledCost of the line it is a part of (`export --with-attribution`'s
# shared splits, service/attribution/per_line.py): that line's BilledCost and the parts' before
# it, so a cost derived from the BilledCost by a rounded ratio (a Tax line's ListCost and
# ContractedCost, service/export/focus.py) is a difference of two roundings of the whole line's,
# and the parts add up to the line's derived cost. A line as it stands: its own, none before.
LINE_BILLED = {"line_billed_cost": "BilledCost", "line_billed_before": f"CAST(0 AS {MONEY})"}


def cost_select_list(expressions: dict[str, str], *, absent_as_null: bool = True,
                     as_text: Iterable[str] = ()) -> str:
    """A SELECT list that casts each canonical column; missing ones become typed NULLs, or
    with `absent_as_null=False` are left out (the lake's stager adds them as null arrays:
    computing dozens of all-NULL columns in DuckDB costs about a CPU second per 1M lines).
    Columns in `as_text` are cast to VARCHAR instead, for the stager to convert once per
    distinct value (service.core.per_value.PerValuePart).

    `expressions` maps canonical column → SQL expression over the connector's input.
    Unknown keys are a programming error, caught here rather than in the lake.
    """
    unknown = set(expressions) - set(COST_COLUMN_NAMES)
    if unknown:
        raise KeyError(f"not canonical cost columns: {sorted(unknown)}")
    as_text = set(as_text)
    parts = []
    for name, kind in COST_COLUMNS:
        if name not in expressions and not absent_as_null:
            continue
        expr = expressions.get(name, "NULL")
        parts.append(f"CAST({expr} AS {'VARCHAR' if name in as_text else kind}) AS {name}")
    return ",\n  ".join(parts)


def cost_view_select(file_columns: Iterable[str]) -> str:
    """The `costs` view's SELECT list over partitions whose files hold `file_columns`:
    every canonical column, in order and type. A partition written before a column existed
    reads it as a typed NULL (and an older type is cast), so old and new partitions union
    until the next ingest rewrites the old ones (Lake.has_delivery)."""
    present = set(file_columns)
    return ", ".join(f"CAST({_quoted(name) if name in present else 'NULL'} AS {kind}) AS {name}"
                     for name, kind in COST_COLUMNS)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# Inventory tables: what exists besides the bill (tags, objects, log groups, GPU use).
# Written by service/ingest/inventory.py through Lake.commit_snapshot, one partition per source and
# INVENTORY_PARTITION[table]: a daily snapshot (`snapshot_date`, the UTC date of the run;
# re-running the same day replaces it, so daily partitions show growth), except
# `gpu_utilization`, a time series partitioned by the UTC `day` of its `hour` (every
# partition holds that day's hours only, so reading all partitions never double counts).
# Tags, ETags and names keep their original spelling; normalisation is attribution's job.
INVENTORY_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    # FOCUS 1.3/1.4 datasets beside Cost and Usage (connectors/focus_datasets.py), FOCUS names
    # and every column of 1.4 (1.3's Contract Commitment has 13 of them; absent ones are NULL).
    # Costs link to them by InvoiceId (invoice_details), by the ContractCommitmentId of each
    # element of ContractApplied (contract_commitments) and by BillingPeriodStart (billing_periods).
    "contract_commitments": (
        ("ContractCommitmentId", "VARCHAR"),
        ("ContractCommitmentType", "VARCHAR"),
        ("ContractCommitmentCategory", "VARCHAR"),  # Spend | Usage
        ("ContractCommitmentCost", MONEY),
        ("ContractCommitmentQuantity", QUANTITY),
        ("ContractCommitmentUnit", "VARCHAR"),
        ("ContractCommitmentDescription", "VARCHAR"),
        ("ContractCommitmentPeriodStart", "TIMESTAMP"),
        ("ContractCommitmentPeriodEnd", "TIMESTAMP"),
        ("ContractId", "VARCHAR"),
        ("ContractPeriodStart", "TIMESTAMP"),
        ("ContractPeriodEnd", "TIMESTAMP"),
        ("BillingCurrency", "VARCHAR"),
        ("ContractCommitmentApplicability", "VARCHAR"),
        ("ContractCommitmentBenefitCategory", "VARCHAR"),
        ("ContractCommitmentCreated", "TIMESTAMP"),
        ("ContractCommitmentDiscountPercentage", QUANTITY),
        ("ContractCommitmentDurationType", "VARCHAR"),
        ("ContractCommitmentFulfillmentInterval", "VARCHAR"),
        ("ContractCommitmentLastUpdated", "TIMESTAMP"),
        ("ContractCommitmentLifecycleStatus", "VARCHAR"),
        ("ContractCommitmentModel", "VARCHAR"),
        ("ContractCommitmentOfferCategory", "VARCHAR"),
        ("ContractCommitmentPaymentInterval", "VARCHAR"),
        ("ContractCommitmentPaymentModel", "VARCHAR"),
        ("ContractCommitmentPaymentUpfrontPercentage", QUANTITY),
        ("InvoiceIssuerName", "VARCHAR"),
        ("PricingCurrency", "VARCHAR"),
        ("PricingCurrencyContractCommitmentCost", MONEY),
        ("ServiceProviderName", "VARCHAR"),
    ),
    "billing_periods": (
        ("BillingPeriodStart", "TIMESTAMP"),
        ("BillingPeriodEnd", "TIMESTAMP"),
        ("BillingPeriodStatus", "VARCHAR"),  # Open | Closed (final)
        ("BillingPeriodCreated", "TIMESTAMP"),
        ("BillingPeriodLastUpdated", "TIMESTAMP"),
        ("InvoiceIssuerName", "VARCHAR"),
    ),
    "invoice_details": (
        ("InvoiceDetailId", "VARCHAR"),
        ("InvoiceId", "VARCHAR"),
        ("ReferenceInvoiceId", "VARCHAR"),  # the invoice a credit or debit note corrects
        ("BillingAccountId", "VARCHAR"),
        ("BillingPeriodStart", "TIMESTAMP"),
        ("BillingPeriodEnd", "TIMESTAMP"),
        ("ChargeCategory", "VARCHAR"),
        ("BilledCost", MONEY),
        ("BillingCurrency", "VARCHAR"),
        ("InvoiceDetailDescription", "VARCHAR"),
        ("InvoiceDetailGrain", "VARCHAR"),
        ("InvoiceDetailCreated", "TIMESTAMP"),
        ("InvoiceDetailLastUpdated", "TIMESTAMP"),
        ("InvoiceIssueDate", "TIMESTAMP"),
        ("InvoiceIssueStatus", "VARCHAR"),
        ("InvoiceIssuerName", "VARCHAR"),
        ("PaymentDueDate", "TIMESTAMP"),
        ("PaymentTerms", "VARCHAR"),
    ),
    # One row per (resource, tag); a resource with no tags has one row with NULL key/value.
    "resource_tags": (
        ("resource_id", "VARCHAR"),  # the ARN, as the Tagging API returns it
        ("region", "VARCHAR"),
        ("key", "VARCHAR"),
        ("value", "VARCHAR"),
    ),
    "s3_objects": (
        ("bucket", "VARCHAR"),
        ("key", "VARCHAR"),
        ("size", "BIGINT"),
        ("etag", "VARCHAR"),  # without quotes
        ("multipart", "BOOLEAN"),  # ETag ends in -N
        ("part_count", "INTEGER"),  # N of a multipart ETag, else NULL
        ("checksum_algorithm", "VARCHAR"),  # CRC32, CRC32C, SHA1, SHA256, CRC64NVME or NULL
        ("checksum_value", "VARCHAR"),  # base64, when the source has it (local listings)
        ("storage_class", "VARCHAR"),
        ("last_modified", "TIMESTAMP"),
    ),
    "s3_buckets": (
        ("bucket", "VARCHAR"),
        ("lifecycle", "VARCHAR"),  # none | expiration | transition (expiration wins when both)
        ("expiration_days", "INTEGER"),  # smallest enabled Expiration.Days, else NULL
        ("rules", "VARCHAR"),  # the enabled lifecycle rules as JSON text
    ),
    "log_groups": (
        ("region", "VARCHAR"),
        ("name", "VARCHAR"),
        ("retention_days", "INTEGER"),  # NULL: never expires
        ("stored_bytes", "BIGINT"),
        ("created_at", "TIMESTAMP"),
    ),
    "gpu_utilization": (
        ("resource_id", "VARCHAR"),  # EC2 instance id, as in the bill's ResourceId
        ("gpu", "INTEGER"),  # GPU index; NULL for the instance aggregate (mean over its GPUs)
        ("hour", "TIMESTAMP"),  # start of the UTC hour
        ("util_pct", "DOUBLE"),  # 0-100 whatever the series' own scale
        ("metric", "VARCHAR"),  # the series it came from, e.g. DCGM_FI_PROF_SM_ACTIVE
    ),
    # One row per job record of a scheduler (slurm-jobs, k8s-pods, jobs-file): a Slurm job
    # allocation (one per attempt of a requeued job; steps are not jobs), a Kubernetes pod, a
    # jobs file's row. A job held `gpus` GPUs on each of its `nodes` in equal parts over
    # [start_time, end_time). Each snapshot holds what the source shows that day; for history,
    # read every snapshot of a source and keep each record_id from the newest one (a job
    # running in one snapshot has ended in a later one).
    "jobs": (
        ("record_id", "VARCHAR"),  # one record of one source, the same in every snapshot
        ("job_id", "VARCHAR"),  # as the scheduler shows it: 1234, 1234_7 (array task), 1234+1 (het), ns/pod
        ("run_id", "VARCHAR"),  # the run the job belongs to; its job_id unless a label or column says
        ("scheduler", "VARCHAR"),  # slurm | kubernetes | file
        ("cluster", "VARCHAR"),
        ("state", "VARCHAR"),  # COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, RUNNING, ...
        ("submit_time", "TIMESTAMP"),
        ("start_time", "TIMESTAMP"),  # NULL: never started
        ("end_time", "TIMESTAMP"),  # NULL: still running (or pending)
        ("gpus", "DOUBLE"),  # held in all, over all nodes; a MIG slice is its fraction of a GPU
        ("nodes", "VARCHAR[]"),  # host names, expanded (p5-[001-002] → p5-001, p5-002); NULL: unknown
        ("instance_ids", "VARCHAR[]"),  # EC2 instance ids, when the source knows them; NULL: unknown
        ("user", "VARCHAR"),
        ("account", "VARCHAR"),  # Slurm account
        ("partition", "VARCHAR"),  # Slurm partition
        ("qos", "VARCHAR"),  # Slurm QOS; Kubernetes priority class
        ("namespace", "VARCHAR"),  # Kubernetes namespace
        ("name", "VARCHAR"),  # job name; pod name
        ("team", "VARCHAR"),  # team, project, experiment, job_type: only where the source states them
        ("project", "VARCHAR"),  # (a jobs file's columns); labels carry the rest, as written
        ("experiment", "VARCHAR"),
        ("job_type", "VARCHAR"),
        ("labels", "MAP(VARCHAR, VARCHAR)"),  # pod labels; Slurm wckey, comment and its key=value pairs
        ("restarts", "INTEGER"),  # Slurm: requeues before this attempt; Kubernetes: container restarts
        ("gpu_util_hourly", "MAP(TIMESTAMP, DOUBLE)"),  # hour → mean GPU use % (DCGM), when known
    ),
}
INVENTORY_PARTITION = {table: "snapshot_date" for table in INVENTORY_TABLES} | {"gpu_utilization": "day"}


def inventory_select_list(table: str, expressions: dict[str, str]) -> str:
    """Like cost_select_list, for one inventory table: every column cast, missing ones NULL."""
    columns = INVENTORY_TABLES[table]
    unknown = set(expressions) - {name for name, _ in columns}
    if unknown:
        raise KeyError(f"not columns of {table}: {sorted(unknown)}")
    return ",\n  ".join(f"CAST({expressions.get(name, 'NULL')} AS {kind}) AS {name}" for name, kind in columns)
