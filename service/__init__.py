"""spendlake: cloud billing exports → Parquet lake → attribution, findings, metrics, reports."""

from service.core.units import use_exact_decimals

__version__ = "0.1.0"

use_exact_decimals()  # before any money is added: see service/core/units.py
