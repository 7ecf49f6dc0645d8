"""The FinOps Foundation's `focus-validator` as a judge of FOCUS files, run offline.

`.ci/focus-validator` installs it (pinned, Python >= 3.12) in `.cache/focus-validator`;
`FOCUS_VALIDATOR` may name another executable. Under CI=true a missing validator fails the
test that needs it, elsewhere it skips with the install hint (like conftest.require_binary).

    report = validate(path)                      # a .csv, .csv.gz or .parquet file, or a folder
    report = validate(path, criteria="ALL")      # --applicability-criteria ALL
    report.failed_ids                            # {'BilledCost-C-005-C', ...}
    report.failures("Mandatory")                 # failed rules whose keyword is MUST / MUST NOT

The console report is parsed (2.2.1 has no machine-readable output carrying the violations)
and checked against its own `Total | Pass | Fail | Skipped` line, so a format change fails
loudly instead of reading as "no failures". A folder is one dataset: its data files are
concatenated (by column name, values as text for CSV) into one file, because the validator
reads single files only.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tests.conftest import REPO

INSTALL = REPO / ".cache" / "focus-validator"
MODEL_VERSION = "1.2.0.1"

# The keyword of a rule's requirement → its level (RFC 2119 words, as FOCUS uses them).
LEVELS = {"MUST": "Mandatory", "MUST NOT": "Mandatory", "SHOULD": "Recommended", "SHOULD NOT": "Recommended",
          "RECOMMENDED": "Recommended", "MAY": "Optional"}

_STATUS_LINE = re.compile(r"^\S+ (?P<id>\S+): (?P<status>PASS|FAIL|SKIPPED)(?:  \(.*\))?$")
_FAILURE_LINE = re.compile(r"^- (?P<id>\S+): violations=(?P<violations>[^;]*); (?P<message>.*)$")
_TOTAL_LINE = re.compile(r"^Total: (\d+) \| Pass: (\d+) \| Fail: (\d+) \| Skipped: (\d+)$")


@dataclass(frozen=True)
class Rule:
    id: str
    status: str  # PASS, FAIL or SKIPPED
    keyword: str  # MUST, MUST NOT, SHOULD, SHOULD NOT, RECOMMENDED, MAY
    function: str  # the model's check function; "Composite" rules fail when a child fails
    violations: str = ""  # as reported: a row count for row checks, 1 or 0 for the others
    message: str = ""

    @property
    def level(self) -> str:
        return LEVELS[self.keyword]


@dataclass(frozen=True)
class Report:
    rules: dict[str, Rule]

    @property
    def failed_ids(self) -> frozenset[str]:
        return frozenset(rule.id for rule in self.rules.values() if rule.status == "FAIL")

    def failures(self, level: str | None = None) -> list[Rule]:
        """Failed rules, by id, optionally only those of one level (Mandatory, Recommended, Optional)."""
        return sorted((rule for rule in self.rules.values()
                       if rule.status == "FAIL" and (level is None or rule.level == level)), key=lambda r: r.id)

    def count(self, status: str) -> int:
        return sum(rule.status == status for rule in self.rules.values())


_reports: dict[tuple[Path, str | None], Report] = {}


def validate_once(path: Path, criteria: str | None = None) -> Report:
    """`validate(path)`, run once per file and criteria for the whole test session (a run takes
    10-40 s), so a provider's file and its export are judged by the same run."""
    key = (Path(path).resolve(), criteria)
    if key not in _reports:
        _reports[key] = validate(path, criteria=criteria)
    return _reports[key]


def unexplained_failures(report: Report, level: str | None = None) -> list[Rule]:
    """Failed rules, without the failed alternatives of an OR composite that passed (the
    validator reports each child of `InvoiceId-C-003-C`, "null when not invoiced OR not null
    when invoiced": one of them fails on every file while the rule itself holds)."""
    rules = model()
    alternatives = set()
    for rule_id, rule in report.rules.items():
        requirement = rules[rule_id]["ValidationCriteria"]["Requirement"]
        if rule.function == "Composite" and requirement.get("CheckFunction") == "OR" and rule.status == "PASS":
            alternatives |= {item.get("ModelRuleId") for item in requirement["Items"]}
    return [rule for rule in report.failures(level) if rule.id not in alternatives]


def executable() -> Path:
    """The validator, or fail (CI=true) / skip (elsewhere) naming how to install it."""
    path = Path(os.environ.get("FOCUS_VALIDATOR") or INSTALL / "bin" / "focus-validator")
    if path.is_file() and os.access(path, os.X_OK):
        return path
    message = f"{path} not found: run `bash .ci/focus-validator` (needs Python >= 3.12)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def package_dir(validator: Path) -> Path:
    """The installed `focus_validator` package next to the executable's interpreter."""
    found = sorted(validator.resolve().parent.parent.glob("lib/python3*/site-packages/focus_validator"))
    if not found:
        raise RuntimeError(f"no focus_validator package beside {validator}")
    return found[-1]


def model(version: str = MODEL_VERSION, validator: Path | None = None) -> dict:
    """The rule model bundled with the validator (what --block-download validates against)."""
    path = package_dir(validator or executable()) / "rules" / f"model-{version}.json"
    return json.loads(path.read_text())["ModelRules"]


def validate(path: Path, *, criteria: str | None = None, version: str = MODEL_VERSION,
             dataset: str = "CostAndUsage", timeout: float = 600) -> Report:
    """Run the validator offline on a file or folder and return every rule's result."""
    validator = executable()
    package = package_dir(validator)
    rules = model(version, validator)
    with tempfile.TemporaryDirectory(prefix="focus-validator-") as work:
        work_dir = Path(work)
        data = single_file(Path(path), work_dir)
        # 2.2.1 opens focus_validator/rules/currency_codes.csv relative to the working
        # directory and writes its log there: run it in a scratch folder that links the package.
        (work_dir / "focus_validator").symlink_to(package, target_is_directory=True)
        command = [str(validator), "--data-file", str(data.resolve()), "--validate-version", version,
                   "--block-download", "--focus-dataset", dataset, "--output-type", "console"]
        if criteria:
            command += ["--applicability-criteria", criteria]
        env = dict(os.environ, PYTHONUTF8="1", PYTHONIOENCODING="utf-8")
        done = subprocess.run(command, cwd=work_dir, capture_output=True, text=True, encoding="utf-8",
                              errors="replace", env=env, timeout=timeout)
    if done.returncode or "Traceback (most recent call last)" in done.stderr:
        raise RuntimeError(f"focus-validator exited {done.returncode} on {path}:\n{done.stderr[-3000:]}")
    return parse(done.stdout, rules)


def parse(stdout: str, rules: dict) -> Report:
    """Rule results from the console report; raises when the report does not add up."""
    statuses: dict[str, str] = {}
    details: dict[str, tuple[str, str]] = {}
    totals = None
    for line in stdout.splitlines():
        if match := _TOTAL_LINE.match(line):
            totals = tuple(int(n) for n in match.groups())
        elif match := _STATUS_LINE.match(line):
            statuses[match["id"]] = match["status"]
        elif match := _FAILURE_LINE.match(line):
            details[match["id"]] = (match["violations"], match["message"])
    report = Report({rule_id: Rule(rule_id, status, rules[rule_id]["ValidationCriteria"]["Keyword"],
                                   rules[rule_id]["Function"], *details.get(rule_id, ("", "")))
                     for rule_id, status in statuses.items()})
    counted = (len(statuses), report.count("PASS"), report.count("FAIL"), report.count("SKIPPED"))
    if totals is None or counted != totals or set(details) != report.failed_ids:
        raise RuntimeError(f"focus-validator report not understood (summary {totals}, parsed {counted}):\n"
                           f"{stdout[:3000]}")
    return report


def single_file(path: Path, work: Path) -> Path:
    """The one .csv or .parquet file the validator reads for `path` (file or folder)."""
    if path.is_file() and path.suffix in (".csv", ".parquet"):
        return path
    if path.is_file() and path.name.endswith(".csv.gz"):
        target = work / path.name[:-3]
        with gzip.open(path, "rb") as source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink)
        return target
    if not path.is_dir():
        raise ValueError(f"{path}: not a .csv, .csv.gz or .parquet file, nor a folder")
    parquet = sorted(str(p) for p in path.rglob("*.parquet"))
    csv = sorted(str(p) for p in path.rglob("*.csv")) + sorted(str(p) for p in path.rglob("*.csv.gz"))
    if bool(parquet) == bool(csv):
        raise ValueError(f"{path}: expected Parquet or CSV files, found {len(parquet)} and {len(csv)}")
    con = duckdb.connect()
    if parquet:
        target = work / "dataset.parquet"
        # Hive folders (Column=value/) give back the columns they were partitioned by.
        con.execute(f"COPY (SELECT * FROM read_parquet(?, union_by_name=true, hive_partitioning=true)) "
                    f"TO '{target}' (FORMAT parquet)", [parquet])
    else:
        target = work / "dataset.csv"
        con.execute(f"COPY (SELECT * FROM read_csv(?, union_by_name=true, all_varchar=true)) "
                    f"TO '{target}' (FORMAT csv, HEADER)", [csv])
    return target
