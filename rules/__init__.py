"""Waste rules over the lake. Each rule is one module registered by its kebab-case name;
`rules.base.registered()` imports the built-in ones. Rules import only service.core."""

from rules.base import RULES, Finding, Owner, Rule, RuleConfig, RuleContext, configure, register, registered

__all__ = ["RULES", "Finding", "Owner", "Rule", "RuleConfig", "RuleContext", "configure", "register", "registered"]
