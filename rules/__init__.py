"""Waste rules over the lake. Each rule is one module, registered by its kebab-case name as an
entry point (`spendlake.rules`); `rules.base.registered()` loads them. Rules import only service.core."""

from rules.base import Finding, Owner, Rule, RuleConfig, RuleContext, configure, registered

__all__ = ["Finding", "Owner", "Rule", "RuleConfig", "RuleContext", "configure", "registered"]
