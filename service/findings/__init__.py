"""Findings: run the rules against the lake, attach owners, store them; budgets and forecasts."""
