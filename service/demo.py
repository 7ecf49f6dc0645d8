"""`spendlake demo`: the synthetic ML organisation's bill, ingested into a local lake.

Layout under the demo directory (default `./spendlake-data`, so the lake is where
`spendlake` looks without a config):

    <dir>/demo/export/ml-org-cur2/   the CUR 2.0 delivery (data/ and metadata/)
    <dir>/demo/inventory/            tags, S3 listing and lifecycles, log groups, GPU utilisation
                                     (connectors.synthetic_inventory), as local files
    <dir>/demo/spendlake.yaml        the config the demo used: one `aws-cur2` source and
                                     four inventory sources reading those files
    <dir>/lake/                      the lake
    <dir>/reports/<last day>/        the daily report of the window's last day (service.report)

Deterministic for a given seed and window; re-running the same day rewrites identical
files, so the ingest finds every delivery already held and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import yaml

from connectors.synthetic import GenerationResult, generate_organisation
from connectors.synthetic_inventory import write_inventory
from service.core.config import Config, load_config
from service.ingest import IngestResult, ingest
from service.inventory import InventoryOutcome, run_inventory
from service.report import ReportResult, write_report

DEFAULT_DIR = Path("spendlake-data")
SOURCE_NAME = "ml-org"


@dataclass
class DemoResult:
    config_path: Path
    config: Config
    generation: GenerationResult
    ingest: IngestResult
    inventory: list[InventoryOutcome]
    report: ReportResult  # the daily report of the window's last day


def run_demo(directory: str | Path = DEFAULT_DIR, *, days: int = 60, seed: int = 7,
             start: date | None = None) -> DemoResult:
    """Generate the organisation's export, write the demo config, ingest it."""
    root = Path(directory).resolve()
    demo_dir = root / "demo"
    generation = generate_organisation(demo_dir / "export", days=days, start=start, seed=seed, formats=("parquet",))
    inventory = write_inventory(generation.organisation, demo_dir / "inventory")
    config_path = demo_dir / "spendlake.yaml"
    document = {
        "lake": str(root / "lake"),
        "sources": [{"name": SOURCE_NAME, "kind": "aws-cur2", "location": str(generation.exports["parquet"])}],
        "inventory": inventory.sources(SOURCE_NAME),
    }
    text = "# written by `spendlake demo`; edit a copy, it is rewritten on every run\n" + yaml.safe_dump(
        document, sort_keys=False)
    if not config_path.exists() or config_path.read_text(encoding="utf-8") != text:
        config_path.write_text(text, encoding="utf-8")
    config = load_config(config_path)
    ingested = ingest(config)
    snapshots = run_inventory(config)
    last_day = generation.organisation.start + timedelta(days=generation.organisation.days - 1)
    return DemoResult(config_path=config_path, config=config, generation=generation, ingest=ingested,
                      inventory=snapshots, report=write_report(config, last_day))
