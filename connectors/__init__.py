"""Readers of billing exports and inventories. They read and normalise; only the lake writes.

Importing this package registers every built-in connector (see `connectors.base.register`).
"""

from connectors.base import CONNECTORS, CostConnector, Delivery, connector_for, register

__all__ = ["CONNECTORS", "CostConnector", "Delivery", "connector_for", "register"]
