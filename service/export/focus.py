"""The FOCUS Cost and Usage columns of an export, and the SQL that makes each line conform.

The lake keeps what the bill says; FOCUS asks for more than some bills say. An exported
line carries the lake's value of every FOCUS column, except where FOCUS requires a value
the lake lacks or forbids one it holds. Those cases, and only those, are filled or cleared
here, each from the line's own columns (and the names of its ids from other lines; the lake
is never changed):

- Not-null columns the bill leaves empty: PublisherName and InvoiceIssuerName are the
  ProviderName; RegionName, SubAccountName and BillingAccountName (FOCUS: not null when
  their id is not) are the name other lines of the provider give that id, else the id;
  ChargeFrequency follows ChargeCategory (Usage → Usage-Based, else One-Time); ResourceType
  (FOCUS: not null when ResourceId is not) is the resource type an Azure resource id names
  (`Microsoft.Sql/servers/databases` in `…/providers/Microsoft.Sql/servers/s/databases/d`),
  or an AWS id's (an ARN's resource type, a bare id's prefix: AWS_ID_TYPES, an S3 line's
  bucket), else what the bill says; SkuMeter (FOCUS: should not be null beside a SkuId) is the usage
  type (AWS's own FOCUS 1.2 export moved x_UsageType into SkuMeter); BillingAccountType and
  SubAccountType (not null beside their ids) are what the provider calls those ids (Microsoft:
  Billing Account, Subscription; Google Cloud: Billing Account, Project; see ACCOUNT_TYPES);
  PricingCurrency is the BillingCurrency, PricingCurrencyEffectiveCost the EffectiveCost when
  the two currencies agree; ServiceCategory and ServiceSubcategory come from the service
  name (service/export/categories.py), a category of another vocabulary is translated.
- Costs a file holds only one of: an actual-cost export (Azure) has no EffectiveCost, an
  amortized one no BilledCost. EffectiveCost is then 0 on a purchase (FOCUS: a purchase
  covering future charges is amortized into them) and the BilledCost otherwise; BilledCost
  is 0 where a commitment covered the line (CommitmentDiscountStatus Used or Unused: the
  purchase is what was billed) and the EffectiveCost otherwise; either is 0 where another
  source holds that cost of the line's billing account and period (an Azure bill as two
  sources, the actual export's and the amortized export's: lookups.HELD), so the bill's billed
  and effective cost each count once, as the lake's do. Both exports list the same usage: its
  quantities, list and contracted cost count on the amortized export's lines (ELSEWHERE: 0 on the
  actual's), a purchase's on the actual export's (the amortized one has none). ContractedCost, when the
  bill has none, is ContractedUnitPrice × PricingQuantity (FOCUS: the product MUST match it;
  Microsoft's own FOCUS export of an EA account does the same on every line, also where it
  differs from the cost paid: 483 of 995 lines in samples/focus), else the BilledCost;
  ListCost is ListUnitPrice × PricingQuantity, else the ContractedCost (no list price known:
  nothing below the price paid can be claimed). Products are rounded to 12 decimals, once per
  line of the bill: a part of a split line (`--with-attribution`) takes its exact share of the
  line's product (LINE_PRODUCTS), so the parts add up to the plain export's line. A Tax
  line without a ListCost (aws-cur: AWS writes a public On-Demand cost of 0 on tax) or a
  ContractedCost takes FOCUS's rule for a charge calculated from other charges: its
  BilledCost × the ListCost (the ContractedCost) ÷ the BilledCost of the lines it taxes (the
  same provider, billing and sub account, service and currency: AWS bills tax per account
  and service), else (none, they billed nothing, or their cost and billed cost have opposite
  signs: a net credit the tax cannot be on) its BilledCost; rounded half away from zero to the places the tax is billed in (its currency's minor unit, or its own finer ones): the
  taxed lines' contracted cost (a 12-decimal product) differs from their billed cost by the
  bill's rounding, which left a USD 3,698.96 tax contracted at 3698.960000000066. A part of a
  split Tax line (`--with-attribution`) takes the line's derived cost up to its end less up to
  its start (LINE_BILLED: the line's places), so the parts add up to the line's. A CUR's
  SavingsPlanNegation contracts at 0 with no unit price (NEGATION); a pod's or task's split cost
  allocation row (SPLIT_ROW) contracts and lists at 0, at unit prices 0: its instance's line holds them.
  A CUR's DiscountedUsage (RESERVED_USAGE: a reservation covered it) contracts at its ListCost and
  ListUnitPrice: FOCUS's contracted price excludes commitment discounts, and its rate is the reservation's.
- InvoiceIssuerName is the ProviderName when the invoicing entity is one of the provider's
  own companies (`Amazon Web Services EMEA SARL` for `AWS`): FOCUS reads an issuer other
  than the provider as a third party collecting the payment (BilledCost then 0). So is it on a
  line whose BilledCost is not 0 (a reseller's, a marketplace seller's line the bill charges
  anyway: ingest said so, service/core/invoice_issuers.py): the cost is what this bill charged,
  never changed. The legal entity stays in `x_InvoicingEntity`.
- Columns FOCUS wants null: on Tax lines the pricing and SKU columns (PricingQuantity,
  PricingUnit, PricingCategory, the unit prices, SkuId, SkuPriceId, SkuPriceDetails);
  ConsumedQuantity and ConsumedUnit on lines that are not Usage or that are unused
  commitment; a column whose subject is absent (SkuMeter without SkuId, PricingUnit
  without PricingQuantity, ResourceType without ResourceId, SubAccountName/Type without
  SubAccountId, BillingAccountType without BillingAccountId, the CommitmentDiscount
  details without CommitmentDiscountId, CommitmentDiscountUnit without its quantity); empty
  strings anywhere (FOCUS: null, never ''); a PricingQuantity without a PricingUnit on a
  line FOCUS does not price (a credit); a negative unit price on a line FOCUS does not price
  (a credit, a correction: AWS writes the credited amount, or a Savings Plan negation's
  negative rate, as its rate), since FOCUS unit prices are never negative; the costs derived
  from it keep its value. A priced line (Usage, Purchase) with a quantity and
  no unit (an AWS fee) counts `Units`.
- A commitment fee that carries part of its cost as EffectiveCost (AWS's recurring Savings
  Plan or reservation fee, amortized: the commitment left unused) is two FOCUS lines: the
  Purchase (EffectiveCost 0) and a Usage line with CommitmentDiscountStatus Unused holding
  that EffectiveCost (no billed, list or contracted cost), so every sum stays the lake's.

Tags (and AllocatedTags) are written as JSON objects; times are UTC; money is DECIMAL(38,12)
and quantities DECIMAL(38,16), as in the lake.
"""

from __future__ import annotations

from service.core.invoice_issuers import own_entity_sql
from service.core.schema import (COST_TYPES, EXTENSION_COLUMNS, FOCUS_1_2_COLUMNS, FOCUS_1_3_ADDITIONS,
                                 LINE_PRODUCTS, MONEY, TAG_MAP)
from service.export.lookups import NAMED_IDS
from service.export.taxes import TAXED, taxes_sql

VERSIONS = ("1.2", "1.3")
# What a FOCUS 1.3 dataset holds beyond 1.2: the 1.3 additions. ProviderName and
# PublisherName stay (deprecated in 1.3, not removed).
FOCUS_COLUMNS = {
    "1.2": tuple(name for name, _ in FOCUS_1_2_COLUMNS),
    "1.3": tuple(name for name, _ in FOCUS_1_2_COLUMNS + FOCUS_1_3_ADDITIONS),
}
# The lake's own extension columns, kept as custom columns after the FOCUS ones; plus the
# invoicing entity (see the module docstring) and the source it came from.
EXTENSIONS = tuple(name for name, _ in EXTENSION_COLUMNS)
SOURCE_COLUMN = "x_source"  # the configured source a line came from
INVOICING_ENTITY = "x_InvoicingEntity"
ALLOCATION_COLUMNS = tuple(name for name, _ in FOCUS_1_3_ADDITIONS if name.startswith("Allocated"))

# BillingAccountType and SubAccountType a provider's cost data gives its billing and sub
# account ids (FOCUS: not null beside the id): Microsoft's own FOCUS export of an EA billing
# account; Google's billing export names billing_account_id and project.id so. AWS documents its FOCUS
# export's columns but not these values: AWS lines keep none.
ACCOUNT_TYPES = {"microsoft": ("Billing Account", "Subscription"), "google cloud": ("Billing Account", "Project")}

# An AWS resource id without an ARN: its prefix, named as the resource's ARN names its type
# (`arn:aws:ec2:…:instance/i-…`); AWS's own FOCUS export fills `instance` and `volume` so.
AWS_ID_TYPES = {"i": "instance", "vol": "volume", "snap": "snapshot", "eni": "network-interface",
                "nat": "natgateway", "ami": "image", "vpn": "vpn-connection", "cr": "capacity-reservation",
                "eipalloc": "elastic-ip", "fs": "file-system"}

# A quantity without a unit on a line FOCUS does not price (credits, adjustments): dropped.
NO_UNIT_NEEDED = "(PricingUnit IS NULL AND ChargeCategory NOT IN ('Usage', 'Purchase'))"
# Lines FOCUS does not require a unit price on (it MAY be null there; never on Usage or Purchase).
UNPRICED = "(ChargeCategory NOT IN ('Usage', 'Purchase') OR ChargeClass = 'Correction')"
UNIT_PRICES = ("ListUnitPrice", "ContractedUnitPrice", "PricingCurrencyListUnitPrice",
               "PricingCurrencyContractedUnitPrice")
# A CUR's SavingsPlanNegation takes back the billed cost of the usage a Savings Plan covered, whose
# line holds the hour's list and contracted cost (AWS's own FOCUS export: that one line): it
# contracts at 0, as it lists at 0 (aws_common), with no unit price, whatever its rate says.
NEGATION = "(x_line_item_type = 'SavingsPlanNegation')"
# A pod's or task's split cost allocation row restates part of its EC2 instance's usage, whose own
# line holds the cost: it contracts and lists at 0 (aws_common: ListCost 0), at unit prices 0 (FOCUS
# wants them on usage), whatever rate it carries, or its rate × hours counts the instance again.
SPLIT_ROW = "(x_split_parent_resource_id IS NOT NULL)"
# A CUR's DiscountedUsage is usage a reservation covered: billed 0, its rate (none, or the
# reservation's) a commitment discount, which FOCUS's contracted price excludes. It contracts at its
# On-Demand price, as the FOCUS spec's AWS reservation examples do (no private pricing: the list).
RESERVED_USAGE = "(x_line_item_type = 'DiscountedUsage')"
CONTRACTED_LIST = {"ContractedUnitPrice": "ListUnitPrice",
                   "PricingCurrencyContractedUnitPrice": "PricingCurrencyListUnitPrice"}
# A Tax line without a list cost: it is derived from the lines it taxes (TAXED).
TAX_WITHOUT_LIST = "(ChargeCategory = 'Tax' AND ListCost IS NULL)"
# A line's EffectiveCost, else 0 on a purchase or where another source holds the EffectiveCost of its
# billing account and period (lookups.HELD: the amortized export of the bill the line's source holds
# actual), else its BilledCost.
EFFECTIVE = ("coalesce(EffectiveCost, CASE WHEN ChargeCategory = 'Purchase' OR effective_elsewhere THEN 0 "
             "ELSE BilledCost END)")
# A line whose charge another source's line of its bill holds (lookups.HELD: an actual export's usage beside the
# amortized export's; an amortized export's other charge beside the actual's): quantities, list and contracted cost 0.
ELSEWHERE = ("(CASE WHEN nullif(ChargeCategory, '') = 'Usage' THEN EffectiveCost IS NULL AND effective_elsewhere "
             "ELSE BilledCost IS NULL AND billed_elsewhere END)")
FEE_WITH_UNUSED = ("(ChargeCategory = 'Purchase' AND CommitmentDiscountId IS NOT NULL "
                   "AND coalesce(EffectiveCost, 0) <> 0)")


def _text(name: str) -> str:
    return f"nullif({name}, '')"


def _product(name: str) -> str:
    """The line's LINE_PRODUCTS column `name` (its price × quantity rounded to the money scale, NULL
    when it would not fit; a part of a line: its exact share of the line's) where the price and
    quantity are there (step 1 clears them on Tax lines)."""
    price, quantity = LINE_PRODUCTS[name]
    return f"CASE WHEN {price} IS NOT NULL AND {quantity} IS NOT NULL THEN {name} END"


def _arm_type(resource_id: str) -> str:
    """SQL: the resource type an Azure Resource Manager id names (the namespace after its last
    `/providers/`, then every other segment: `Microsoft.Compute/virtualMachines`), else NULL."""
    pairs = f"regexp_extract({resource_id}, '(?i)^(?:/subscriptions/.*)?/providers/([^/]+(?:/[^/]+/[^/]*)+)$', 1)"
    return (f"nullif(array_to_string(list_filter(string_split({pairs}, '/'), lambda part, i: i = 1 OR i % 2 = 0), "
            "'/'), '')")


def _aws_type(resource_id: str, provider: str, service: str) -> str:
    """SQL: the resource type an AWS id names, as AWS's own FOCUS export writes it (samples/focus:
    `instance` for i-…, `volume` for vol-…, `distribution` for a CloudFront ARN): an ARN's resource
    type (`arn:aws:logs:…:log-group:/ml/x` → `log-group`; an S3 bucket's ARN, which has none, →
    `bucket`); an AWS S3 line's bare id (a bucket name) `bucket`, another AWS line's bare id by its
    prefix (AWS_ID_TYPES); else NULL."""
    arn = f"regexp_extract({resource_id}, '^arn:[^:]+:([^:]+):[^:]*:[^:]*:(?:([^/:]+)[/:])?', ['service', 'type'])"
    prefix = f"regexp_extract({resource_id}, '^([a-z]+)-[0-9a-z]{{8,}}$', 1)"
    by_prefix = " ".join(f"WHEN '{key}' THEN '{kind}'" for key, kind in AWS_ID_TYPES.items())
    bucket = f"({service} = 'Amazon Simple Storage Service' AND NOT regexp_matches({resource_id}, '[/:]'))"
    return (f"CASE WHEN {resource_id} LIKE 'arn:%' THEN CASE WHEN {arn}.service <> 's3' THEN nullif({arn}.type, '') "
            f"WHEN NOT contains({resource_id}, '/') THEN 'bucket' END "
            f"WHEN lower({provider}) NOT IN ('aws', 'amazon web services') THEN NULL WHEN {bucket} THEN 'bucket' "
            f"ELSE CASE {prefix} {by_prefix} END END")


def _account_type(column: str, which: int) -> str:
    """SQL: `column`, else the account type ACCOUNT_TYPES gives the line's provider (0: billing, 1: sub)."""
    cases = " ".join(f"WHEN '{provider}' THEN '{types[which]}'" for provider, types in ACCOUNT_TYPES.items())
    return f"coalesce({column}, CASE lower(ProviderName) {cases} END)"


def conform_sql(source: str, version: str, extra: tuple[str, ...] = (), taxed: str = "export_taxed") -> str:
    """SELECT every FOCUS column of `version` (conforming, see the module docstring), then the
    extension columns, then `extra` columns as they are, from relation `source` (the `costs`
    columns and LINE_PRODUCTS, plus `service_category`/`service_subcategory`, the pair
    categories.py chose) and
    `taxed`, the result of taxed_sql(source) over the same lines. Each step reads the one
    before once, so the lines stream: a step read twice is materialized (DuckDB holds every
    line of the period in memory: 10 GB for 10M lines)."""
    columns = [*FOCUS_COLUMNS[version], *EXTENSIONS, INVOICING_ENTITY, *extra]
    return (f"WITH conform1 AS ({_step1(source)}), conform2 AS ({_step2()}), "
            f"conform3 AS ({taxes_sql('conform2', taxed)}), "
            f"conform4 AS ({_step4()}) SELECT {', '.join(_output(name) for name in columns)} FROM conform4")


def taxed_sql(source: str) -> str:
    """Per TAXED group, the list, contracted and billed cost of the lines a Tax line taxes
    (see taxes.taxes_sql): small, read before conform_sql's pass over the lines."""
    return (f"WITH conform1 AS ({_step1(source)}), conform2 AS ({_step2()}) "
            f"SELECT {', '.join(TAXED)}, sum(ListCost) AS taxed_list, sum(ContractedCost) AS taxed_contracted, "
            "sum(BilledCost) AS taxed_billed FROM conform2 WHERE ChargeCategory IS DISTINCT FROM 'Tax' GROUP BY ALL")


def _step1(source: str) -> str:
    """Text columns without empty strings; who, what and when columns filled or cleared."""
    replaced = {}
    for name, kind in COST_TYPES.items():
        if kind == "VARCHAR":
            replaced[name] = _text(name)
    provider = _text("ProviderName")
    issuer = _text("InvoiceIssuerName")
    category = _text("ChargeCategory")
    replaced.update({
        "PublisherName": f"coalesce({_text('PublisherName')}, {provider})",
        "InvoiceIssuerName": f"CASE WHEN {issuer} IS NULL OR {own_entity_sql(issuer, provider)} THEN {provider} "
                             f"ELSE {issuer} END",
        "ChargeFrequency": f"coalesce({_text('ChargeFrequency')}, "
                           f"CASE WHEN {category} = 'Usage' THEN 'Usage-Based' ELSE 'One-Time' END)",
        "PricingCurrency": f"coalesce({_text('PricingCurrency')}, {_text('BillingCurrency')})",
        "ServiceCategory": "service_category",
        "ServiceSubcategory": "service_subcategory",
        "PricingUnit": f"coalesce(focus_pricing_unit, {_text('PricingUnit')})",
        "ConsumedUnit": f"coalesce(focus_consumed_unit, {_text('ConsumedUnit')})",
        "CommitmentDiscountUnit": f"coalesce(focus_commitment_unit, {_text('CommitmentDiscountUnit')})",
        **{name: f"coalesce({_text(name)}, {known}, {_text(id_column)})" for name, id_column, known in NAMED_IDS},
        "ServiceProviderName": f"coalesce({_text('ServiceProviderName')}, {provider})",
        "HostProviderName": f"coalesce({_text('HostProviderName')}, {provider})",
    })
    tax_null = ("PricingQuantity", "PricingUnit", "PricingCategory", "ListUnitPrice", "ContractedUnitPrice",
                "PricingCurrencyListUnitPrice", "PricingCurrencyContractedUnitPrice", "SkuId", "SkuPriceId",
                "SkuPriceDetails", "SkuMeter")
    for name in ("ConsumedQuantity", "PricingQuantity"):
        replaced[name] = f"CASE WHEN {ELSEWHERE} THEN 0 ELSE {name} END"
    for name in tax_null:
        replaced[name] = f"CASE WHEN {category} = 'Tax' THEN NULL ELSE {replaced.get(name, name)} END"
    not_consumed = (f"{category} IS DISTINCT FROM 'Usage' OR "
                    f"coalesce({_text('CommitmentDiscountStatus')}, '') = 'Unused'")
    for name in ("ConsumedQuantity", "ConsumedUnit"):
        replaced[name] = f"CASE WHEN {not_consumed} THEN NULL ELSE {replaced.get(name, name)} END"
    select = ", ".join(f"{replaced.get(name, name)} AS {name}" for name in COST_TYPES)
    return (f"SELECT * EXCLUDE ({', '.join(COST_TYPES)}), {select}, {issuer} AS {INVOICING_ENTITY}, "
            f"{ELSEWHERE} AS counted_elsewhere FROM {source}")


def _step2() -> str:
    """Costs derived from each other; columns whose subject is absent cleared."""
    covered = "CommitmentDiscountStatus IN ('Used', 'Unused')"
    contracted = f"coalesce(ContractedCost, {_product('line_contracted_product')}, BilledCost, " \
                 "EffectiveCost)"
    billed = f"coalesce(BilledCost, CASE WHEN {covered} OR billed_elsewhere THEN 0 ELSE EffectiveCost END)"
    replaced = {
        "BilledCost": billed,
        # a third party's line billing a cost (invoice_issuers: FOCUS bills it 0): the payment is on this bill
        "InvoiceIssuerName": f"CASE WHEN {billed} <> 0 THEN ProviderName ELSE InvoiceIssuerName END",
        "EffectiveCost": EFFECTIVE,
        "ContractedCost": f"CASE WHEN counted_elsewhere THEN CAST(0 AS {MONEY}) "
                          f"WHEN ChargeCategory = 'Tax' THEN ContractedCost "
                          f"WHEN {NEGATION} OR {SPLIT_ROW} THEN coalesce(ContractedCost, 0) "
                          f"WHEN {RESERVED_USAGE} THEN coalesce(ContractedCost, ListCost, "
                          f"{_product('line_list_product')}, {contracted}) ELSE {contracted} END",
        "ListCost": f"CASE WHEN counted_elsewhere THEN CAST(0 AS {MONEY}) WHEN {TAX_WITHOUT_LIST} THEN NULL "
                    f"WHEN {SPLIT_ROW} THEN coalesce(ListCost, 0) "
                    f"ELSE coalesce(ListCost, {_product('line_list_product')}, {contracted}) END",
        "PricingCurrencyEffectiveCost": "coalesce(PricingCurrencyEffectiveCost, CASE WHEN PricingCurrency = "
                                        f"BillingCurrency THEN {EFFECTIVE} END)",
        "SkuMeter": "CASE WHEN SkuId IS NULL THEN NULL ELSE coalesce(SkuMeter, x_usage_type) END",
        "SkuPriceDetails": "CASE WHEN SkuPriceId IS NULL THEN NULL ELSE SkuPriceDetails END",
        "PricingQuantity": f"CASE WHEN {NO_UNIT_NEEDED} THEN NULL ELSE PricingQuantity END",
        "PricingUnit": f"CASE WHEN PricingQuantity IS NULL OR {NO_UNIT_NEEDED} THEN NULL "
                       "ELSE coalesce(PricingUnit, 'Units') END",
        "ConsumedUnit": "CASE WHEN ConsumedQuantity IS NULL THEN NULL ELSE coalesce(ConsumedUnit, PricingUnit) END",
        "ResourceType": "CASE WHEN ResourceId IS NULL THEN NULL "
                        f"ELSE coalesce(ResourceType, {_arm_type('ResourceId')}, "
                        f"{_aws_type('ResourceId', 'ProviderName', 'ServiceName')}) END",
        "SubAccountName": "CASE WHEN SubAccountId IS NULL THEN NULL ELSE SubAccountName END",
        "SubAccountType": f"CASE WHEN SubAccountId IS NULL THEN NULL ELSE {_account_type('SubAccountType', 1)} END",
        "BillingAccountType": f"CASE WHEN BillingAccountId IS NULL THEN NULL "
                              f"ELSE {_account_type('BillingAccountType', 0)} END",
        "CommitmentDiscountUnit": "CASE WHEN CommitmentDiscountQuantity IS NULL THEN NULL "
                                  "ELSE CommitmentDiscountUnit END",
    }
    for name in ("CommitmentDiscountName", "CommitmentDiscountCategory", "CommitmentDiscountType",
                 "CommitmentDiscountStatus", "CommitmentDiscountQuantity"):
        replaced[name] = f"CASE WHEN CommitmentDiscountId IS NULL THEN NULL ELSE {name} END"
    for name in UNIT_PRICES:  # after the costs above were derived from them
        split = "0" if name in ("ListUnitPrice", "ContractedUnitPrice") else f"0 * {name}"  # the others: if given
        reserved = f"WHEN {RESERVED_USAGE} THEN {CONTRACTED_LIST[name]} " if name in CONTRACTED_LIST else ""
        replaced[name] = (f"CASE WHEN {name} < 0 AND {UNPRICED} OR {NEGATION} THEN NULL "
                          f"WHEN {SPLIT_ROW} THEN {split} {reserved}ELSE {name} END")
    select = ", ".join(f"{expr} AS {name}" for name, expr in replaced.items())
    return f"SELECT * REPLACE ({select}) FROM conform1"


def _step4() -> str:
    """A commitment's recurring fee as FOCUS splits it: the Purchase line (EffectiveCost 0: it
    is amortized into the usage it covers) and, where the bill amortizes part of it onto the
    fee line itself (AWS: the commitment left unused), a Usage line of that EffectiveCost with
    CommitmentDiscountStatus Unused and no billed, list or contracted cost. Every sum stays.
    The second line is unnested beside the first, in the same pass over the lines."""
    zero = f"CAST(0 AS {MONEY})"
    keep = f"CASE WHEN unused_line THEN {{0}} WHEN {FEE_WITH_UNUSED} THEN {zero} ELSE {{0}} END AS {{0}}"
    purchase = [keep.format(name) for name in ("EffectiveCost", "PricingCurrencyEffectiveCost")]
    unused = {"ChargeCategory": "'Usage'", "ChargeFrequency": "'Usage-Based'", "CommitmentDiscountStatus": "'Unused'",
              "BilledCost": zero, "ListCost": zero, "ContractedCost": zero, "x_credits": zero,
              "ConsumedQuantity": "CAST(NULL AS DECIMAL(38,16))", "ConsumedUnit": "CAST(NULL AS VARCHAR)"}
    replaced = ", ".join([*purchase, *(f"CASE WHEN unused_line THEN {expr} ELSE {name} END AS {name}"
                                       for name, expr in unused.items())])
    lines = (f"SELECT *, unnest(CASE WHEN {FEE_WITH_UNUSED} THEN [false, true] ELSE [false] END) AS unused_line "
             "FROM conform3")
    return f"SELECT * EXCLUDE (unused_line) REPLACE ({replaced}) FROM ({lines})"


def _output(name: str) -> str:
    """A column as the file holds it: tag maps as JSON objects, everything else as is."""
    if COST_TYPES.get(name) == TAG_MAP:
        return f"CAST(to_json({name}) AS VARCHAR) AS {name}"
    if name == SOURCE_COLUMN:
        return f"source AS {SOURCE_COLUMN}"
    return name
