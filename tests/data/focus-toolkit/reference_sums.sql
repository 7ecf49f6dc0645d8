-- Reference row counts and sums of the fixtures in this folder, per file (a Hive folder counts as
-- one file), dataset, billing period and currency. Run from this folder: the regenerate script does
--   duckdb.sql(open('reference_sums.sql').read()).write_csv('reference_sums.csv')
-- Money is summed as DECIMAL(38,17) (the toolkit's Parquet type; its CSVs carry at most 15
-- decimals), from text for CSV, so the sums are exact and independent of float order.
-- billing_period_start is written as in the CSVs ('2026-05-01T00:00:00Z'). Hive folders hold
-- their partition columns only in the folder names (BillingPeriodStart=2026-05-01T00%3A00%3A00Z).
-- commitment = sum(ContractCommitmentCost) for Contract Commitment rows.
SELECT 'generate/aws-1.2/focus_1_2_cost_and_usage_aws.csv.gz' AS file, 'CostAndUsage' AS dataset, BillingPeriodStart AS billing_period_start, BillingCurrency AS currency, count(*) AS n_rows,
       sum(CAST(BilledCost AS DECIMAL(38,17))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38,17))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38,17))) AS list, sum(CAST(ContractedCost AS DECIMAL(38,17))) AS contracted, NULL AS commitment
FROM read_csv('generate/aws-1.2/focus_1_2_cost_and_usage_aws.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'generate/aws-1.3/focus_1_3_cost_and_usage_aws.csv.gz' AS file, 'CostAndUsage' AS dataset, BillingPeriodStart AS billing_period_start, BillingCurrency AS currency, count(*) AS n_rows,
       sum(CAST(BilledCost AS DECIMAL(38,17))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38,17))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38,17))) AS list, sum(CAST(ContractedCost AS DECIMAL(38,17))) AS contracted, NULL AS commitment
FROM read_csv('generate/aws-1.3/focus_1_3_cost_and_usage_aws.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'generate/azure-1.2/focus_1_2_cost_and_usage_azure.csv.gz' AS file, 'CostAndUsage' AS dataset, BillingPeriodStart AS billing_period_start, BillingCurrency AS currency, count(*) AS n_rows,
       sum(CAST(BilledCost AS DECIMAL(38,17))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38,17))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38,17))) AS list, sum(CAST(ContractedCost AS DECIMAL(38,17))) AS contracted, NULL AS commitment
FROM read_csv('generate/azure-1.2/focus_1_2_cost_and_usage_azure.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'generate/azure-1.3/focus_1_3_cost_and_usage_azure.csv.gz' AS file, 'CostAndUsage' AS dataset, BillingPeriodStart AS billing_period_start, BillingCurrency AS currency, count(*) AS n_rows,
       sum(CAST(BilledCost AS DECIMAL(38,17))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38,17))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38,17))) AS list, sum(CAST(ContractedCost AS DECIMAL(38,17))) AS contracted, NULL AS commitment
FROM read_csv('generate/azure-1.3/focus_1_3_cost_and_usage_azure.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'generate/gcp-1.2/focus_1_2_cost_and_usage_gcp.csv.gz' AS file, 'CostAndUsage' AS dataset, BillingPeriodStart AS billing_period_start, BillingCurrency AS currency, count(*) AS n_rows,
       sum(CAST(BilledCost AS DECIMAL(38,17))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38,17))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38,17))) AS list, sum(CAST(ContractedCost AS DECIMAL(38,17))) AS contracted, NULL AS commitment
FROM read_csv('generate/gcp-1.2/focus_1_2_cost_and_usage_gcp.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'generate/gcp-1.3/focus_1_3_cost_and_usage_gcp.csv.gz' AS file, 'CostAndUsage' AS dataset, BillingPeriodStart AS billing_period_start, BillingCurrency AS currency, count(*) AS n_rows,
       sum(CAST(BilledCost AS DECIMAL(38,17))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38,17))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38,17))) AS list, sum(CAST(ContractedCost AS DECIMAL(38,17))) AS contracted, NULL AS commitment
FROM read_csv('generate/gcp-1.3/focus_1_3_cost_and_usage_gcp.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_cost_and_usage.csv' AS file, 'CostAndUsage' AS dataset, BillingPeriodStart AS billing_period_start, BillingCurrency AS currency, count(*) AS n_rows,
       sum(CAST(BilledCost AS DECIMAL(38,17))) AS billed, sum(CAST(EffectiveCost AS DECIMAL(38,17))) AS effective,
       sum(CAST(ListCost AS DECIMAL(38,17))) AS list, sum(CAST(ContractedCost AS DECIMAL(38,17))) AS contracted, NULL AS commitment
FROM read_csv('convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_cost_and_usage.csv', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'convert/aws-1.3-strict-parquet/focus_1_4_cost_and_usage.parquet', 'CostAndUsage', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), BillingCurrency, count(*),
       sum(CAST(BilledCost AS DECIMAL(38,17))), sum(CAST(EffectiveCost AS DECIMAL(38,17))), sum(CAST(ListCost AS DECIMAL(38,17))),
       sum(CAST(ContractedCost AS DECIMAL(38,17))), NULL
FROM read_parquet('convert/aws-1.3-strict-parquet/focus_1_4_cost_and_usage.parquet') GROUP BY ALL
UNION ALL
SELECT 'convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_cost_and_usage.parquet', 'CostAndUsage', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), BillingCurrency, count(*),
       sum(CAST(BilledCost AS DECIMAL(38,17))), sum(CAST(EffectiveCost AS DECIMAL(38,17))), sum(CAST(ListCost AS DECIMAL(38,17))),
       sum(CAST(ContractedCost AS DECIMAL(38,17))), NULL
FROM read_parquet('convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_cost_and_usage.parquet') GROUP BY ALL
UNION ALL
SELECT 'convert/gcp-1.2-synthetic-parquet-hive/synthetic_focus_1_4_cost_and_usage', 'CostAndUsage', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), BillingCurrency, count(*),
       sum(CAST(BilledCost AS DECIMAL(38,17))), sum(CAST(EffectiveCost AS DECIMAL(38,17))), sum(CAST(ListCost AS DECIMAL(38,17))),
       sum(CAST(ContractedCost AS DECIMAL(38,17))), NULL
FROM read_parquet('convert/gcp-1.2-synthetic-parquet-hive/synthetic_focus_1_4_cost_and_usage/**/*.parquet', hive_partitioning=true) GROUP BY ALL
UNION ALL
SELECT 'convert/azure-1.2-strict-parquet-hive/focus_1_4_cost_and_usage', 'CostAndUsage', BillingPeriodStart, BillingCurrency, count(*),
       sum(CAST(BilledCost AS DECIMAL(38,17))), sum(CAST(EffectiveCost AS DECIMAL(38,17))), sum(CAST(ListCost AS DECIMAL(38,17))),
       sum(CAST(ContractedCost AS DECIMAL(38,17))), NULL
FROM read_parquet('convert/azure-1.2-strict-parquet-hive/focus_1_4_cost_and_usage/**/*.parquet', hive_partitioning=true) GROUP BY ALL
UNION ALL
SELECT 'duckdb/aws-1.2-hive-subaccount', 'CostAndUsage', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), BillingCurrency, count(*),
       sum(CAST(BilledCost AS DECIMAL(38,17))), sum(CAST(EffectiveCost AS DECIMAL(38,17))), sum(CAST(ListCost AS DECIMAL(38,17))),
       sum(CAST(ContractedCost AS DECIMAL(38,17))), NULL
FROM read_parquet('duckdb/aws-1.2-hive-subaccount/**/*.parquet', hive_partitioning=true) GROUP BY ALL
UNION ALL
SELECT 'generate/aws-1.3/focus_1_3_contract_commitment_aws.csv.gz', 'ContractCommitment', NULL, BillingCurrency, count(*), NULL, NULL, NULL, NULL,
       sum(CAST(ContractCommitmentCost AS DECIMAL(38,17)))
FROM read_csv('generate/aws-1.3/focus_1_3_contract_commitment_aws.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'generate/azure-1.3/focus_1_3_contract_commitment_azure.csv.gz', 'ContractCommitment', NULL, BillingCurrency, count(*), NULL, NULL, NULL, NULL,
       sum(CAST(ContractCommitmentCost AS DECIMAL(38,17)))
FROM read_csv('generate/azure-1.3/focus_1_3_contract_commitment_azure.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'generate/gcp-1.3/focus_1_3_contract_commitment_gcp.csv.gz', 'ContractCommitment', NULL, BillingCurrency, count(*), NULL, NULL, NULL, NULL,
       sum(CAST(ContractCommitmentCost AS DECIMAL(38,17)))
FROM read_csv('generate/gcp-1.3/focus_1_3_contract_commitment_gcp.csv.gz', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_contract_commitment.csv', 'ContractCommitment', NULL, BillingCurrency, count(*), NULL, NULL, NULL, NULL,
       sum(CAST(ContractCommitmentCost AS DECIMAL(38,17)))
FROM read_csv('convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_contract_commitment.csv', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_contract_commitment.parquet', 'ContractCommitment', NULL, BillingCurrency, count(*), NULL, NULL, NULL, NULL,
       sum(CAST(ContractCommitmentCost AS DECIMAL(38,17)))
FROM read_parquet('convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_contract_commitment.parquet') GROUP BY ALL
UNION ALL
SELECT 'convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_billing_period.csv', 'BillingPeriod', BillingPeriodStart, NULL, count(*), NULL, NULL, NULL, NULL, NULL
FROM read_csv('convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_billing_period.csv', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_billing_period.parquet', 'BillingPeriod', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), NULL, count(*), NULL, NULL, NULL, NULL, NULL
FROM read_parquet('convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_billing_period.parquet') GROUP BY ALL
UNION ALL
SELECT 'convert/gcp-1.2-synthetic-parquet-hive/synthetic_focus_1_4_billing_period.parquet', 'BillingPeriod', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), NULL, count(*), NULL, NULL, NULL, NULL, NULL
FROM read_parquet('convert/gcp-1.2-synthetic-parquet-hive/synthetic_focus_1_4_billing_period.parquet') GROUP BY ALL
UNION ALL
SELECT 'convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_invoice_detail.csv', 'InvoiceDetail', BillingPeriodStart, BillingCurrency, count(*), sum(CAST(BilledCost AS DECIMAL(38,17))),
       NULL, NULL, NULL, NULL
FROM read_csv('convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_invoice_detail.csv', all_varchar=true) GROUP BY ALL
UNION ALL
SELECT 'convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_invoice_detail.parquet', 'InvoiceDetail', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), BillingCurrency, count(*), sum(CAST(BilledCost AS DECIMAL(38,17))),
       NULL, NULL, NULL, NULL
FROM read_parquet('convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_invoice_detail.parquet') GROUP BY ALL
UNION ALL
SELECT 'convert/gcp-1.2-synthetic-parquet-hive/synthetic_focus_1_4_invoice_detail.parquet', 'InvoiceDetail', strftime(BillingPeriodStart AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%SZ'), BillingCurrency, count(*), sum(CAST(BilledCost AS DECIMAL(38,17))),
       NULL, NULL, NULL, NULL
FROM read_parquet('convert/gcp-1.2-synthetic-parquet-hive/synthetic_focus_1_4_invoice_detail.parquet') GROUP BY ALL
ORDER BY file, dataset, billing_period_start, currency;
