"""FOCUS columns the export derives from a line's own columns where the bill leaves them empty
(service/export/focus.py): only what the line states, never a guess."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import yaml
from test_clusters_eks_cur2 import G5, RI, add_to, config_file, hour, write_export
from test_export import USAGE_LINE, exported_lines

from service.core.config import parse_config
from service.export import ExportOptions, export_focus
from service.ingest.billing import ingest


def test_an_azure_resource_id_gives_its_resource_type_and_other_ids_give_none(tmp_path):
    """FOCUS: ResourceType is not null when ResourceId is not. Azure EA cost details name no
    type, but an Azure Resource Manager id states it: the namespace after its last
    `/providers/` and every other segment after it. A type on the line stays; an id that is not
    an ARM id (a resource group, a GCP name, a short AWS-like id) gets none."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "provider", **USAGE_LINE, "ResourceId": "id", "ResourceType": "type",
    }, "('Microsoft', '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1', NULL), "
       "('Microsoft', '/SUBSCRIPTIONS/S/RESOURCEGROUPS/RG/PROVIDERS/MICROSOFT.SQL/SERVERS/A/DATABASES/B', NULL), "
       "('Microsoft', '/providers/Microsoft.Capacity/reservationOrders/o/reservations/', NULL), "
       "('Microsoft', '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/"
       "providers/Microsoft.Insights/diagnosticSettings/d', NULL), "
       "('Microsoft', '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/app', 'Web App'), "
       "('Microsoft', '/subscriptions/s/resourceGroups/rg', NULL), "
       "('AWS', 'i-0abc', NULL), ('Google Cloud', '//example', NULL), ('AWS', NULL, NULL)",
       "provider, id, type", "ResourceId, ResourceType")
    assert lines == [
        ("//example", None),
        ("/SUBSCRIPTIONS/S/RESOURCEGROUPS/RG/PROVIDERS/MICROSOFT.SQL/SERVERS/A/DATABASES/B",
         "MICROSOFT.SQL/SERVERS/DATABASES"),
        ("/providers/Microsoft.Capacity/reservationOrders/o/reservations/",
         "Microsoft.Capacity/reservationOrders/reservations"),
        ("/subscriptions/s/resourceGroups/rg", None),
        ("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/"
         "providers/Microsoft.Insights/diagnosticSettings/d", "Microsoft.Insights/diagnosticSettings"),
        ("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1",
         "Microsoft.Compute/virtualMachines"),
        ("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/app", "Web App"),
        ("i-0abc", None),
        (None, None),
    ]


def test_an_aws_resource_id_gives_the_type_its_arn_or_prefix_names(tmp_path):
    """FOCUS: ResourceType is not null when ResourceId is not; every AWS line with an id had none
    (focus-validator ResourceType-C-005-C on the demo's vol- and i- lines). AWS's own FOCUS export
    writes the ARN's resource type (`instance` for i-…, `volume` for vol-…, `distribution` for a
    CloudFront ARN): an ARN gives it (an S3 bucket's, which has none, `bucket`), a bare AWS id its
    prefix's (the EC2 ones), an S3 line's bare id (its bucket's name) `bucket`. An id naming no type
    (an SNS topic's ARN, a bucket name on another service, an unknown prefix) keeps none, as does a
    bare id on another provider's line; a type on the line stays."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "provider", **USAGE_LINE, "ServiceName": "service", "ResourceId": "id",
        "ResourceType": "type",
    }, "('AWS', 'Amazon Elastic Compute Cloud', 'i-0abc1234def567890', NULL), "
       "('AWS', 'Amazon Elastic Compute Cloud', 'vol-2f692b61eb74b5743', NULL), "
       "('AWS', 'Amazon Elastic Compute Cloud', 'snap-07736b8b99a0a1263', NULL), "
       "('AWS', 'Amazon Elastic Compute Cloud', 'arn:aws:ec2:us-east-1:314159265358:capacity-reservation/cr-01', "
       "NULL), "
       "('AWS', 'AmazonCloudWatch', 'arn:aws:logs:us-east-1:314159265358:log-group:/ml/pretrain', NULL), "
       "('AWS', 'Amazon CloudFront', 'arn:aws:cloudfront::961082193871:distribution/E1JOJW8QMT69J2', NULL), "
       "('AWS', 'Amazon Simple Storage Service', 'arn:aws:s3:::ckpt-llama', NULL), "
       "('AWS', 'Amazon Simple Storage Service', 'datasets-raw', NULL), "
       "('AWS', 'Amazon Simple Notification Service', 'arn:aws:sns:us-east-1:314159265358:alerts', NULL), "
       "('AWS', 'Amazon Elastic Compute Cloud', 'eval-results', NULL), "
       "('AWS', 'Amazon Elastic Compute Cloud', 'xyz-0abc1234def567890', NULL), "
       "('AWS', 'Amazon Elastic Compute Cloud', 'i-0fff1234def567890', 'EC2 Instance'), "
       "('Google Cloud', 'Compute Engine', 'i-0abc1234def567890', NULL)",
       "provider, service, id, type", "ProviderName, ResourceId, ResourceType")
    assert lines == [
        ("AWS", "arn:aws:cloudfront::961082193871:distribution/E1JOJW8QMT69J2", "distribution"),
        ("AWS", "arn:aws:ec2:us-east-1:314159265358:capacity-reservation/cr-01", "capacity-reservation"),
        ("AWS", "arn:aws:logs:us-east-1:314159265358:log-group:/ml/pretrain", "log-group"),
        ("AWS", "arn:aws:s3:::ckpt-llama", "bucket"),
        ("AWS", "arn:aws:sns:us-east-1:314159265358:alerts", None),
        ("AWS", "datasets-raw", "bucket"),
        ("AWS", "eval-results", None),
        ("AWS", "i-0abc1234def567890", "instance"),
        ("AWS", "i-0fff1234def567890", "EC2 Instance"),
        ("AWS", "snap-07736b8b99a0a1263", "snapshot"),
        ("AWS", "vol-2f692b61eb74b5743", "volume"),
        ("AWS", "xyz-0abc1234def567890", None),
        ("Google Cloud", "i-0abc1234def567890", None),
    ]


def test_an_aws_lines_usage_type_is_its_sku_meter(tmp_path):
    """FOCUS: SkuMeter should not be null when SkuId is not. A CUR names no meter, but AWS's own
    FOCUS 1.2 export writes the usage type there (it replaced FOCUS 1.0's x_UsageType): the
    export does the same where the line has a SkuId and no SkuMeter; a meter on the line stays,
    and a line without a SkuId (a tax) has none."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "'Amazon Elastic Compute Cloud'", "ChargeCategory": "category",
        "BilledCost": "'1'", "EffectiveCost": "'1'", "SkuId": "sku", "SkuMeter": "meter", "x_usage_type": "usage_type",
    }, "('Usage', 'JRTCKXETXF', NULL, 'USE1-BoxUsage:p5.48xlarge'), "
       "('Usage', '6YS6EN2CT7', 'Compute', 'USE1-BoxUsage:p4d.24xlarge'), "
       "('Usage', 'ABCDEFGHIJ', NULL, NULL), "
       "('Tax', NULL, NULL, 'USE1-BoxUsage:p5.48xlarge')",
       "category, sku, meter, usage_type", "ChargeCategory, SkuId, SkuMeter")
    assert lines == [
        ("Tax", None, None),
        ("Usage", "6YS6EN2CT7", "Compute"),
        ("Usage", "ABCDEFGHIJ", None),
        ("Usage", "JRTCKXETXF", "USE1-BoxUsage:p5.48xlarge"),
    ]


def test_azure_and_google_account_ids_get_the_types_their_provider_gives_them(tmp_path):
    """FOCUS: BillingAccountType and SubAccountType are not null when their id is not. Azure
    cost details and Google's billing export give the ids without a type; Microsoft's own FOCUS
    export of the same EA account (samples/focus/azure_focus_1.0_trey_research_1000.csv) calls
    them Billing Account and Subscription, Google's export a billing account and a project. A
    type on the line stays; another provider (AWS: its FOCUS type names are not known here) and
    a line without the id get none."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "provider", **USAGE_LINE, "BillingAccountId": "payer", "BillingAccountType": "payer_type",
        "SubAccountId": "account", "SubAccountType": "account_type",
    }, "('Microsoft', '8611537', NULL, 'ed570627', NULL), "
       "('Google Cloud', '018984-D0AAA4-940B88', NULL, 'examplecorp-prod', NULL), "
       "('Google Cloud', '018984-D0AAA4-940B88', NULL, NULL, NULL), "
       "('Microsoft', 'bp-1', 'Billing Profile', 'ed570627', 'Subscription'), "
       "('AWS', '123412340534', NULL, '111', NULL)",
       "provider, payer, payer_type, account, account_type",
       "ProviderName, BillingAccountId, BillingAccountType, SubAccountId, SubAccountType")
    assert lines == [
        ("AWS", "123412340534", None, "111", None),
        ("Google Cloud", "018984-D0AAA4-940B88", "Billing Account", "examplecorp-prod", "Project"),
        ("Google Cloud", "018984-D0AAA4-940B88", "Billing Account", None, None),
        ("Microsoft", "8611537", "Billing Account", "ed570627", "Subscription"),
        ("Microsoft", "bp-1", "Billing Profile", "ed570627", "Subscription"),
    ]


def test_a_tax_lines_list_cost_follows_the_list_cost_of_the_lines_it_taxes(tmp_path):
    """FOCUS 1.2 ListCost: the list cost of a charge calculated from other charges (a Tax) MUST be
    calculated from their list cost; one unrelated to other charges matches its BilledCost. A CUR
    writes a public On-Demand cost of 0 on its tax lines (samples/aws: 12 of 12), per account and
    service, which the lake keeps as no ListCost: the export scales the tax by its service's list
    ÷ billed cost, exactly, in the tax's minor units. A tax whose service billed nothing, or with no such lines, gets its
    BilledCost; a tax with a list cost of its own (a FOCUS file) keeps it."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "provider", "ServiceName": "service", "ChargeCategory": "category", "SubAccountId": "account",
        "BilledCost": "billed", "EffectiveCost": "billed", "ListCost": "list",
    }, "('AWS', 'Amazon S3', 'Usage', '111', '1.3705653565', '1.3708601348'), "
       "('AWS', 'Amazon S3', 'Usage', '111', '0', '0.0000001'), "
       "('AWS', 'Amazon S3', 'Tax', '111', '0.07', NULL), "
       "('AWS', 'Amazon S3', 'Tax', '222', '0.05', NULL), "
       "('AWS', 'AmazonCloudWatch', 'Usage', '111', '0', '1.7343309718'), "
       "('AWS', 'AmazonCloudWatch', 'Tax', '111', '0.01', NULL), "
       "('Microsoft', 'Compute', 'Usage', 's', '100', '110'), "
       "('Microsoft', 'Compute', 'Tax', 's', '-10', NULL), "
       "('Microsoft', 'Storage', 'Tax', 's', '3', '4')",
       "provider, service, category, account, billed, list",
       "ProviderName, ServiceName, SubAccountId, ChargeCategory, BilledCost, ListCost")
    cents = [(line[0], line[1], line[2], str(line[4]), str(line[5])) for line in lines if line[3] == "Tax"]
    assert cents == [
        # 0.07 × 1.3708602348 ÷ 1.3705653565 = 0.0700150…, in cents as the tax is billed
        ("AWS", "Amazon S3", "111", "0.070000000000", "0.070000000000"),
        ("AWS", "Amazon S3", "222", "0.050000000000", "0.050000000000"),  # account 222 bought nothing taxed
        ("AWS", "AmazonCloudWatch", "111", "0.010000000000", "0.010000000000"),  # its service billed nothing
        ("Microsoft", "Compute", "s", "-10.000000000000", "-11.000000000000"),
        ("Microsoft", "Storage", "s", "3.000000000000", "4.000000000000"),
    ]


def test_a_tax_lines_contracted_cost_follows_the_contracted_cost_of_the_lines_it_taxes(tmp_path):
    """FOCUS 1.2 ContractedCost: with no ContractedUnitPrice, the contracted cost of a charge
    calculated from other charges (a Tax) MUST be calculated from their contracted cost; the
    export gave every tax its BilledCost, so a 10% tax on usage contracted at 80 of its 100
    billed (a negotiated rate the bill states) read 10 where it is 8. A tax whose service has
    no such lines gets its BilledCost; one with a contracted cost of its own keeps it; a credit
    (unrelated to other charges) matches its BilledCost."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "service", "ChargeCategory": "category", "SubAccountId": "'111'",
        "BilledCost": "billed", "EffectiveCost": "billed", "ContractedCost": "contracted",
    }, "('Amazon S3', 'Usage', '100', '80'), ('Amazon S3', 'Tax', '10', NULL), ('Amazon EC2', 'Credit', '-5', NULL), "
       "('AmazonCloudWatch', 'Tax', '1', NULL), ('AWS Support', 'Usage', '20', NULL), "
       "('AWS Support', 'Tax', '2', '1.5')",
       "service, category, billed, contracted", "ServiceName, ChargeCategory, BilledCost, ContractedCost")
    assert [(service, category, str(contracted)) for service, category, _, contracted in lines] == [
        ("AWS Support", "Tax", "1.500000000000"), ("AWS Support", "Usage", "20.000000000000"),
        ("Amazon EC2", "Credit", "-5.000000000000"), ("Amazon S3", "Tax", "8.000000000000"),
        ("Amazon S3", "Usage", "80.000000000000"), ("AmazonCloudWatch", "Tax", "1.000000000000")]


def test_a_tax_on_a_savings_plan_account_contracts_as_its_lines_do_unless_they_net_a_credit(tmp_path):
    """FOCUS: a Tax's ContractedCost is calculated from the ContractedCost of the charges it is on.
    EC2 usage a Savings Plan covered is billed 100, netted by its negation (-100, contracted 0) and
    contracted at 100 (FOCUS's contracted price is before commitment discounts), beside 50 billed
    On-Demand: a 10% tax of 5 on the 50 billed contracts at 15, 10% of the 150 contracted, three times
    the tax, as FOCUS wants (its aggregation note leaves the plan's fee and its tax out of an accrual
    sum for this reason). But where the taxed lines net a credit (a refund of 60 beside them: billed
    -10) the tax is on no such base, and the ratio gave the tax of 5 a ContractedCost of -45; it then
    contracts at its BilledCost, as a tax whose lines billed nothing does."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "service", "ChargeCategory": "category", "SubAccountId": "account",
        "BilledCost": "billed", "EffectiveCost": "billed", "ContractedCost": "contracted",
    }, "('Amazon EC2', '111', 'Usage', '100', '100'), ('Amazon EC2', '111', 'Credit', '-100', '0'), "
       "('Amazon EC2', '111', 'Usage', '50', '50'), ('Amazon EC2', '111', 'Tax', '5', NULL), "
       "('Amazon EC2', '222', 'Usage', '100', '100'), ('Amazon EC2', '222', 'Credit', '-100', '0'), "
       "('Amazon EC2', '222', 'Usage', '50', '50'), ('Amazon EC2', '222', 'Credit', '-60', '-60'), "
       "('Amazon EC2', '222', 'Tax', '5', NULL)",
       "service, account, category, billed, contracted",
       "ChargeCategory, SubAccountId, ContractedCost")
    assert [(account, str(contracted)) for category, account, contracted in lines if category == "Tax"] == [
        ("111", "15.000000000000"), ("222", "5.000000000000")]


def test_a_tax_lines_list_cost_follows_the_lines_it_taxes_in_its_own_billing_period(tmp_path):
    """A tax is scaled by its own month's lines: an export of two months scaled November's tax
    by both months' list ÷ billed cost (here 6 ÷ 2, 0.3 where November's 2 ÷ 1 gives 0.2)."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "'Amazon S3'", "ChargeCategory": "category", "SubAccountId": "'111'",
        "BilledCost": "billed", "EffectiveCost": "billed", "ListCost": "list",
        "BillingPeriodStart": "CAST(period AS TIMESTAMP)", "BillingPeriodEnd": "CAST(period AS TIMESTAMP) + INTERVAL 1 MONTH",
        "ChargePeriodStart": "CAST(period AS TIMESTAMP) + INTERVAL 1 DAY",
        "ChargePeriodEnd": "CAST(period AS TIMESTAMP) + INTERVAL 25 HOUR",
    }, "('2026-11-01', 'Usage', '1', '2'), ('2026-11-01', 'Tax', '0.1', NULL), ('2026-12-01', 'Usage', '1', '4')",
       "period, category, billed, list", "ChargeCategory, BilledCost, ListCost")
    assert [(category, str(listed)) for category, _, listed in lines] == [
        ("Tax", "0.200000000000"), ("Usage", "2.000000000000")]


def test_a_large_tax_lines_list_cost_is_exact_where_its_product_passes_2_to_the_127(tmp_path):
    """The tax × list product of their 10^-12 units passed a HUGEINT (2 million × 200 million:
    4e38 > 1.7e38) and the tax listed silently at its BilledCost; long division keeps it exact."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "'Amazon Elastic Compute Cloud'", "ChargeCategory": "category",
        "SubAccountId": "'111'", "BilledCost": "billed", "EffectiveCost": "billed", "ListCost": "list",
    }, "('Usage', '100000000', '200000000.000000000001'), ('Tax', '-2000000.000000000001', NULL)",
       "category, billed, list", "ChargeCategory, ListCost")
    # -2000000.000000000001 × 200000000.000000000001 ÷ 100000000 = -4000000.00000000000202000000000000000001
    assert [(category, str(listed)) for category, listed in lines] == [
        ("Tax", "-4000000.000000000002"), ("Usage", "200000000.000000000001")]


def test_a_commitment_fee_without_a_public_cost_lists_at_its_billed_cost(tmp_path):
    """A CUR's SavingsPlanRecurringFee and RIFee lines carry no public On-Demand cost (the lake:
    ListCost NULL). FOCUS: without a ListUnitPrice, a charge unrelated to other charges lists at
    its BilledCost; a commitment's price is its list price (the FOCUS toolkit's AWS, Azure and
    GCP files: every commitment Purchase has ListCost = BilledCost). Its unused part, split off
    as a Usage line, lists at 0 (its list cost stays on the Purchase: no sum moves); the covered
    usage keeps its on-demand cost."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "service", "ChargeCategory": "category", "BilledCost": "billed",
        "EffectiveCost": "effective", "ListCost": "list", "CommitmentDiscountId": "commitment",
        "CommitmentDiscountStatus": "status",
    }, "('Savings Plans for AWS Compute usage', 'Purchase', '10', '2.5', NULL, 'arn:sp/1', 'Unused'), "
       "('Amazon Elastic Compute Cloud', 'Purchase', '3.5', '0', NULL, 'arn:ri/1', NULL), "
       "('Amazon Elastic Compute Cloud', 'Usage', '12', '7.5', '12', 'arn:sp/1', 'Used')",
       "service, category, billed, effective, list, commitment, status",
       "CommitmentDiscountId, ChargeCategory, BilledCost, ListCost")
    d = Decimal
    assert lines == [("arn:ri/1", "Purchase", d("3.5"), d("3.5")), ("arn:sp/1", "Purchase", d(10), d(10)),
                     ("arn:sp/1", "Usage", d(0), d(0)), ("arn:sp/1", "Usage", d(12), d(12))]


def test_a_tax_scaled_by_its_services_rounding_keeps_the_minor_units_it_is_billed_in(tmp_path):
    """A tax's derived cost was exact to 12 decimals of a ratio that differs from 1 only by the
    bill's rounding: S3 lines whose ContractedCost is their unit price × quantity (59183.391045030050)
    where the bill rounds each to 10 decimals (59183.391045029000) gave a USD 3,698.96 tax the
    ContractedCost 3698.960000000066, which finance reads as a float error. A tax is billed in its
    currency's minor units (AWS: every Tax line of samples/aws in cents), so is the tax derived from
    it, rounded half away from zero once, or in finer units where the tax itself is written finer
    (a USD 0.0123 tax stays 0.0123): USD in cents, JPY in whole yen, BHD in fils."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "service", "ChargeCategory": "category", "SubAccountId": "'111'",
        "BillingCurrency": "currency", "BilledCost": "billed", "EffectiveCost": "billed", "ListCost": "list",
        "ContractedCost": "contracted",
    }, "('Amazon S3', 'USD', 'Usage', '59183.391045029', '59183.391045029', '59183.39104503005'), "
       "('Amazon S3', 'USD', 'Tax', '3698.96', NULL, NULL), "
       "('Amazon EC2', 'USD', 'Usage', '100', '100.51', '100'), ('Amazon EC2', 'USD', 'Tax', '0.0123', NULL, NULL), "
       "('Amazon S3', 'JPY', 'Usage', '10000', '10005.1', '10000'), ('Amazon S3', 'JPY', 'Tax', '1000', NULL, NULL), "
       "('Amazon S3', 'BHD', 'Usage', '10', '10.0005', '10'), ('Amazon S3', 'BHD', 'Tax', '1.5', NULL, NULL), "
       "('Amazon EC2', 'JPY', 'Usage', '3', '3', '1'), ('Amazon EC2', 'JPY', 'Tax', '-10', NULL, NULL)",
       "service, currency, category, billed, list, contracted",
       "BillingCurrency, ServiceName, ChargeCategory, BilledCost, ListCost, ContractedCost")
    taxes = [(currency, service, str(billed), str(listed), str(contracted))
             for currency, service, category, billed, listed, contracted in lines if category == "Tax"]
    assert taxes == [
        ("BHD", "Amazon S3", "1.500000000000", "1.500000000000", "1.500000000000"),  # 1.500075: 1.500 fils
        ("JPY", "Amazon EC2", "-10.000000000000", "-10.000000000000", "-3.000000000000"),  # -3.33…: -3 yen
        ("JPY", "Amazon S3", "1000.000000000000", "1001.000000000000", "1000.000000000000"),  # 1000.51: 1001 yen
        ("USD", "Amazon EC2", "0.012300000000", "0.012400000000", "0.012300000000"),  # 0.01236273: its own 4 places
        ("USD", "Amazon S3", "3698.960000000000", "3698.960000000000", "3698.960000000000"),
    ]


def test_a_savings_plan_negation_adds_no_contracted_cost_to_the_usage_it_covers(tmp_path):
    """A CUR bills an hour a Savings Plan covered twice: the covered usage at its On-Demand cost and a
    SavingsPlanNegation taking it back (rate and cost negative). The covered line already holds the
    hour's contracted cost, as AWS's own FOCUS export (one line, billed 0) does; the negation derived
    unit price × quantity, 32.7726 where the demo's generator wrote its rate positive, and the hour's
    ContractedCost read twice the usage's (demo 2026-11: overstated by 188,770.176). The negation
    contracts at 0, as it lists at 0, with no unit price, whatever the sign of its rate."""
    lines = exported_lines(tmp_path, {
        "ProviderName": "'AWS'", "ServiceName": "'Amazon Elastic Compute Cloud'", "ChargeCategory": "category",
        "SubAccountId": "'111'", "ResourceId": "rid", "x_line_item_type": "kind", "BilledCost": "billed",
        "EffectiveCost": "effective", "ListCost": "list", "ContractedUnitPrice": "rate", "PricingQuantity": "1",
        "PricingUnit": "'Hrs'",
    }, "('i-a', 'Usage', 'SavingsPlanCoveredUsage', '32.7726', '22.9408', '32.7726', '32.7726'), "
       "('i-a', 'Credit', 'SavingsPlanNegation', '-32.7726', '0', '0', '32.7726'), "
       "('i-b', 'Usage', 'SavingsPlanCoveredUsage', '32.7726', '22.9408', '32.7726', '32.7726'), "
       "('i-b', 'Credit', 'SavingsPlanNegation', '-32.7726', '0', '0', '-32.7726'), "
       "('i-c', 'Credit', 'Credit', '-5', '-5', NULL, '-5')",
       "rid, category, kind, billed, effective, list, rate",
       "ResourceId, ChargeCategory, ContractedUnitPrice, ContractedCost, ListCost")
    d = Decimal
    assert lines == [("i-a", "Credit", None, d(0), d(0)), ("i-a", "Usage", d("32.7726"), d("32.7726"), d("32.7726")),
                     ("i-b", "Credit", None, d(0), d(0)), ("i-b", "Usage", d("32.7726"), d("32.7726"), d("32.7726")),
                     ("i-c", "Credit", None, d(-5), d(-5))]  # a credit's contracted cost is its billed


def test_usage_a_reservation_covered_contracts_at_its_on_demand_cost_not_at_zero(tmp_path):
    """FOCUS's ContractedCost is the cost at negotiated prices without commitment discounts; with no
    private pricing that is the list (the FOCUS spec's AWS reservation examples: the covered hour
    billed 0, contracted and listed at 69). A CUR's DiscountedUsage line is billed 0 with no rate, or
    the reservation's (0.0): it exported ContractedCost 0 beside its ListCost 5.672, so the period's
    contracted sum was the RI's fees alone, 7.00. By hand, two g5 hours at 5.672 On-Demand and the
    RI's fee of 3.50 an hour: contracted 2 × 5.672 + 2 × 3.50 = 18.344, list 11.344 (the fee lists
    at 0), billed and effective 7.00; each covered hour at ContractedUnitPrice 5.672, its list rate."""
    lines: list[dict] = []
    for h, rate in ((10, None), (11, "0.0")):
        add_to(lines, hour(h), "DiscountedUsage", "AmazonEC2", "USE1-BoxUsage:g5.12xlarge", G5, "0", "5.672",
               instance_type="g5.12xlarge", reservation_effective_cost="3.50", reservation_reservation_a_r_n=RI,
               pricing_public_on_demand_rate="5.672", pricing_unit="Hrs",
               **({"line_item_unblended_rate": rate} if rate else {}))
        add_to(lines, hour(h), "RIFee", "AmazonEC2", "HeavyUsage:g5.12xlarge", RI, "3.50", "0",
               instance_type="g5.12xlarge", reservation_reservation_a_r_n=RI,
               reservation_unused_amortized_upfront_fee_for_billing_period="0", reservation_unused_recurring_fee="0")
    config = parse_config(yaml.safe_load(config_file(tmp_path, write_export(tmp_path, "parquet", lines=lines),
                                                     clusters=False).read_text()))
    ingest(config)
    export_focus(config, ExportOptions(str(tmp_path / "focus")))
    data = f"read_parquet('{tmp_path}/focus/*/cost_and_usage.parquet')"
    d = Decimal
    day = "strftime({}, '%Y-%m-%d %H:%M')"
    assert duckdb.sql(f"SELECT {day.format('BillingPeriodStart')}, sum(BilledCost), sum(EffectiveCost), "
                      f"sum(ContractedCost), sum(ListCost) FROM {data} GROUP BY ALL").fetchall() == [
        ("2026-11-01 00:00", d("7.00"), d("7.00"), d("18.344"), d("11.344"))]
    assert duckdb.sql(f"SELECT {day.format('ChargePeriodStart')}, ContractedUnitPrice, ContractedCost, "
                      f"ListUnitPrice, ListCost FROM {data} WHERE CommitmentDiscountStatus = 'Used' ORDER BY 1"
                      ).fetchall() == [(f"2026-11-02 {h}:00", d("5.672"), d("5.672"), d("5.672"), d("5.672"))
                                       for h in (10, 11)]
