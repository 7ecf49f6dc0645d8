"""Readers of billing exports and inventories. They read and normalise; only the lake writes.

Each connector is one module, registered by its `kind` as an entry point (`spendlake.connectors`,
see service/core/registry.py); nothing is imported until its kind is asked for.
"""

from connectors.base import COSTS, CostConnector, Delivery

__all__ = ["COSTS", "CostConnector", "Delivery"]
