"""The house: imports run one way (service.core ← connectors, rules ← the rest of service)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# package → top-level modules it may import from this project
ALLOWED = {
    "service/core": ("service.core",),
    "connectors": ("service.core", "connectors"),
    "rules": ("service.core", "rules"),
}
OURS = ("service", "connectors", "rules")


def project_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [n for n in names if n.split(".")[0] in OURS]


def python_files(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_imports_run_one_way(folder):
    allowed = ALLOWED[folder]
    wrong = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in python_files(folder)
        for name in project_imports(path)
        if not any(name == a or name.startswith(a + ".") for a in allowed)
    ]
    assert not wrong, "imports that run back up the layers:\n" + "\n".join(wrong)


def test_the_detector_sees_a_wrong_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from service.attribution.api import attribute\nimport rules.engine\nimport os\n")
    assert project_imports(bad) == ["service.attribution.api", "rules.engine"]


def test_modules_stay_small():
    too_big = [
        f"{path.relative_to(REPO)}: {n} lines"
        for folder in ("service", "connectors", "rules")
        for path in python_files(folder)
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 450
    ]
    assert not too_big, "split these modules (one role each, about 400 lines at most):\n" + "\n".join(too_big)
