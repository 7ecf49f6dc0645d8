"""Every package the code imports is one pyproject.toml declares: a package that comes only as
another's dependency (urllib3 through botocore) may come in an older version than the code
needs, or not at all, on a machine that installs spendlake alone."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from conftest import REPO

OURS = {"service", "connectors", "rules"}


def imported_modules() -> set[str]:
    found = set()
    for package in OURS:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found - OURS - set(sys.stdlib_module_names) - {"__future__"}


def declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *project.get("optional-dependencies", {}).get("spark", [])]
    return {re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower().replace("_", "-") for line in lines}


def test_every_imported_package_is_declared():
    distributions = packages_distributions()
    undeclared = {module: distributions.get(module) for module in imported_modules()
                  if not {name.lower().replace("_", "-") for name in distributions.get(module, [module])} & declared()}
    assert undeclared == {}
