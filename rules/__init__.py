"""Waste rules over the lake. Each rule is one module, registered by its kebab-case name as an
entry point (`spendlake.rules`); `rules.base.registered()` loads them. Rules import only service.core."""

from rules.base import Finding, Rule, RuleConfig, configure, registered
from rules.context import Owner, RuleContext

__all__ = ["Finding", "Owner", "Rule", "RuleConfig", "RuleContext", "configure", "registered"]
