"""spendlake: cloud billing exports → Parquet lake → attribution, findings, metrics, reports."""

__version__ = "0.1.0"
