"""The house: packages by stage, imports one way, floor by floor, no two modules importing
each other, and small modules.

A package may import its own modules and the packages on floors below it, never a package
on its own floor or above. The order follows the flow of DESIGN.md: ingest sits above
attribution because it rebuilds the rollups after each commit; planning reads only the
lake, so it shares attribution's floor; export (a FOCUS dataset of the lake) shares the
report's.
"""

from __future__ import annotations

import ast
import graphlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

FLOORS: tuple[tuple[str, ...], ...] = (
    ("service.core",),
    ("connectors", "rules"),
    ("service.attribution", "service.planning"),
    ("service.ingest",),
    ("service.findings",),
    ("service.report", "service.export"),
    ("service.serve",),
    ("service.cli",),
)
FLOOR_OF = {package: level for level, packages in enumerate(FLOORS) for package in packages}
OURS = ("service", "connectors", "rules")
MAX_LINES = 400


def project_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [n for n in names if n.split(".")[0] in OURS]


def package_of(module: str) -> str | None:
    """The floor package a dotted module name belongs to (longest prefix), or None."""
    matches = [p for p in FLOOR_OF if module == p or module.startswith(p + ".")]
    return max(matches, key=len) if matches else None


def module_name(path: Path, root: Path = REPO) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def python_files() -> list[Path]:
    return sorted(p for folder in OURS for p in (REPO / folder).rglob("*.py"))


def wrong_imports(path: Path, root: Path = REPO) -> list[str]:
    here = package_of(module_name(path, root))
    wrong = []
    for name in project_imports(path):
        there = package_of(name)
        if there is None:
            wrong.append(f"{name} (in no package of the floor plan)")
        elif there != here and FLOOR_OF[there] >= FLOOR_OF[here]:
            wrong.append(f"{name} (floor {FLOOR_OF[there]}, from floor {FLOOR_OF[here]})")
    return wrong


def test_every_module_sits_in_a_package_of_the_floor_plan():
    loose = [str(p.relative_to(REPO)) for p in python_files()
             if package_of(module_name(p)) is None and module_name(p) not in ("service.__init__", "service.__main__")]
    assert not loose, "modules outside the floor plan (move them into a package):\n" + "\n".join(loose)


@pytest.mark.parametrize("package", sorted(FLOOR_OF))
def test_imports_run_one_way(package):
    wrong = [f"{path.relative_to(REPO)} imports {name}"
             for path in python_files() if package_of(module_name(path)) == package
             for name in wrong_imports(path)]
    assert not wrong, "imports that run sideways or back up the floors:\n" + "\n".join(wrong)


def probe(root: Path, package: str, text: str) -> Path:
    """A module written under a tree of its own (`root`), never the repository's: the other tests of a
    parallel run walk the repository's modules and would read it, or miss it as it is removed."""
    path = root / package / "_layout_probe.py"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_the_detector_sees_a_wrong_import(tmp_path):
    bad = probe(tmp_path, "rules",
                "from service.attribution import attribute\nimport rules.engine\nimport connectors.base\nimport os\n")
    assert project_imports(bad) == ["service.attribution", "rules.engine", "connectors.base"]
    assert wrong_imports(bad, tmp_path) == ["service.attribution (floor 2, from floor 1)",
                                            "connectors.base (floor 1, from floor 1)"]


PUBLIC_API = ("service.attribution",)  # packages whose modules only the package itself imports


def private_imports(path: Path, root: Path = REPO) -> list[str]:
    """Imports of another package's modules where that package has a public API."""
    here = module_name(path, root)
    return [name for name in project_imports(path) for package in PUBLIC_API
            if name.startswith(package + ".") and not here.startswith(package + ".")]


def test_attribution_is_imported_through_its_public_api():
    wrong = [f"{path.relative_to(REPO)} imports {name}" for path in python_files() for name in private_imports(path)]
    assert not wrong, "import these from the package (its __init__), not its modules:\n" + "\n".join(wrong)


def test_the_detector_sees_a_private_import(tmp_path):
    bad = probe(tmp_path, "service/findings",
                "from service.attribution.sql import window_sql\nfrom service.attribution import attribute\n")
    assert private_imports(bad, tmp_path) == ["service.attribution.sql"]
    assert private_imports(REPO / "service" / "attribution" / "lines.py") == []


def test_modules_stay_small():
    too_big = [f"{path.relative_to(REPO)}: {n} lines" for path in python_files()
               if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not too_big, f"split these modules (one role each, {MAX_LINES} lines at most):\n" + "\n".join(too_big)


def module_graph(files: list[Path]) -> dict[str, set[str]]:
    """Module → the modules of ours it imports (anywhere in it, type-checking imports too:
    a circle drawn only for the type checker still ties the two modules together)."""
    def name(path: Path) -> str:
        parts = path.relative_to(REPO).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name(path): path for path in files}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                          for a in node.names}
        graph[module] = {m for m in found if m in modules and m != module}
    return graph


def test_no_two_modules_import_each_other():
    try:
        list(graphlib.TopologicalSorter(module_graph(python_files())).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"modules that import each other (move what both need below them): {' -> '.join(exc.args[1])}")


def test_the_detector_sees_a_circle(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "service").mkdir()
    (tmp_path / "service" / "a.py").write_text("from service.b import x\n")
    (tmp_path / "service" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from service import a\n")
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(module_graph(sorted((tmp_path / "service").glob("*.py")))).static_order())
