"""Ingest export files through the real path (config → service.ingest.billing → lake) for tests."""

from __future__ import annotations

from pathlib import Path

from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import IngestResult, ingest


def ingest_files(tmp_path: Path, *sources: tuple[str, str, str] | dict) -> tuple[Lake, IngestResult]:
    """Ingest sources given as (name, kind, location) or full source dicts into a fresh lake."""
    entries = [s if isinstance(s, dict) else {"name": s[0], "kind": s[1], "location": str(s[2])} for s in sources]
    config = parse_config({"lake": str(tmp_path / "lake"), "sources": entries})
    return Lake(config.lake), ingest(config)


def failures(result: IngestResult) -> list[str]:
    return [str(o.error) for o in result.failed]


def sums(lake: Lake, group_by: str = "ProviderName, BillingCurrency") -> list[tuple]:
    """(group…, rows, Σ BilledCost, Σ EffectiveCost) per group, sorted."""
    return lake.query().execute(
        f"SELECT {group_by}, count(*), sum(BilledCost), sum(EffectiveCost) FROM costs GROUP BY ALL ORDER BY ALL"
    ).fetchall()
