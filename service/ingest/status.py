"""What the lake holds: one entry per (source, billing period, currency), from the ledger,
with each partition's check against its file, and the sources the config no longer names."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from service.core import bill_overlap, derived_records, derived_sweep
from service.core.claims import other_configs
from service.core.coverage import billed_orphans, empty_lake, stamped_ahead
from service.core.lake import Lake
from service.core.ledger import FILES_REMOVED, totals_text
from service.core.output import one_line
from service.core.serving import served_note
from service.core.units import exact_text
from service.ingest.copies import REWRITTEN_HINT
from service.ingest.freshness import SourceFreshness
from service.ingest.shared import HINT as SHARED_HINT

# The columns `spendlake status` shows, in order (JSON carries the same keys).
STATUS_COLUMNS = ("source", "billing_period", "currency", "rows", "billed_cost", "effective_cost", "final",
                  "check", "ingested_at", "delivery_id")
# What CSV and JSON add after a table's columns: a `Note` row's kind and sentence (empty on the table's own rows)
NOTE_COLUMNS = ("note_kind", "note")


@dataclass(frozen=True)
class Note:
    """A line the table of `spendlake status` says on stderr, `<kind>: <text>`, beside its rows;
    CSV and JSON, which hold one table, carry it as a row of that table (`row`)."""

    kind: str  # copies | overlap | derived | removed (lake_notes); failing | stale (freshness_notes); no_bill
    text: str
    source: str | None = None  # the source it is about, when one

    def line(self) -> str:
        return one_line(f"{self.kind}: {self.text}")

    def row(self, keys: Sequence[str]) -> dict:
        """A row of a table whose rows have `keys` (and NOTE_COLUMNS): its source, kind and sentence, the rest empty."""
        return {**dict.fromkeys(keys), "source": self.source, "note_kind": self.kind, "note": self.text}


def with_notes(rows: list[dict], columns: Sequence[str], notes: Sequence[Note]) -> list[dict]:
    """CSV's and JSON's rows: the table's (their NOTE_COLUMNS empty), then a row per note, with the
    same keys (`columns` when the table has no row)."""
    keys = list(rows[0]) if rows else list(columns)
    return [{**row, **dict.fromkeys(NOTE_COLUMNS)} for row in rows] + [note.row(keys) for note in notes]


def freshness_notes(sources: Sequence[SourceFreshness]) -> list[Note]:
    """The table's line for each failing or stale source; CSV and JSON hold them in `--sources`'s
    rows (their `state`, `last_error`, `data_through` and limits), never in the partitions'."""
    return [Note("failing", f"source {row.source}: {row.last_error}", row.source) if row.state == "failing"
            else Note("stale", row.problem() or "", row.source) for row in sources if row.state in ("failing", "stale")]


def lake_notes(lake: Lake) -> list[Note]:
    """What the table says of the lake's files beside its rows, which CSV and JSON carry as rows:
    the copies each source's last ingest skipped, each bill two sources hold (bill_overlap; its
    `source` the first of them), the derived files' damage, and the bills shrunk by files removed."""
    return (copies_skipped(lake) + [Note("overlap", o.sentence(), o.sources[0]) for o in bill_overlap.lake_overlaps(lake)]
            + [Note("derived", line) for line in derived_damage(lake)] + removed_notes(lake))


def removed_notes(lake: Lake) -> list[Note]:
    """Each period the lake holds as read again only because files of its last delivery were gone
    from the location (service.ingest.removed), until a delivery replaces it: from what to what."""
    return [Note("removed", f"source {e.source} {e.billing_period}: read again at {e.ingested_at} only because files "
                            "of its last delivery were gone from the location (no delivery of the cloud): it shrank "
                            f"from {sum(t.rows for t in e.replaced.totals)} rows {totals_text(e.replaced.totals)} to "
                            f"{e.rows} rows {totals_text(e.totals)}", e.source)
            for e in lake.ledger() if e.delivered_by == FILES_REMOVED and e.replaced and lake.counts(e.source)]


def no_bill_note(lake: Lake, sources: Sequence[SourceFreshness], billing: bool) -> Note:
    """What `status` says in place of the partitions of a lake without a bill of the configured
    sources (the table prints it; CSV and JSON, which `[]` left saying nothing, carry it as a row):
    empty, or holding the inventory of the sources the table above lists with data (`sources`,
    source_freshness's rows), and the next step (`billing`: the config names a billing source)."""
    what, step = empty_lake(lake)
    held = [row.source for row in sources if row.data_through is not None]
    if held and not billed_orphans(lake):
        what = f"the lake at {lake.root} holds no bill, only the inventory of {', '.join(held)}"
    if not billing:
        step = "add the bill's export under `sources:`, then run `spendlake ingest`"
    return Note("no_bill", f"{what}: {step}")


def ahead_lines(lake: Lake, now: datetime) -> list[str]:
    """stamped_ahead's sentences (`status`'s `ahead:` lines, /api/v1/status's notes) of the sources the
    config counts: an orphaned source's periods are said once, by orphan_lines, not a stamp each (a
    service whose clock was put right after sources were renamed said 15 lines of the old names')."""
    return stamped_ahead([entry for entry in lake.ledger() if lake.counts(entry.source)], now)


def orphan_lines(lake: Lake) -> list[str]:
    """A line per source the lake holds that the config does not declare (`status` and `verify`
    say them on stderr): what of it the lake holds, that it counts nowhere, and what removes it,
    or which other config on the lake still reads it, or that the running service still serves it
    (its config edited, not reloaded: service/core/serving.py)."""
    others, served = other_configs(lake), served_note(lake)
    return [f"orphaned: {source} is not in the config but the lake holds it ({', '.join(tables)}); it counts nowhere"
            + (f" here; {others[source]}, another config on this lake, still declares it and reads it"
               if source in others else f"; {served[source]}" if source in served
               else f"; `spendlake forget {source}` removes it")
            for source, tables in lake.orphans().items()]


def status(lake: Lake) -> list[dict]:
    """`check`: `ok`, `missing`, `truncated`, `altered` (size or footer against the ledger,
    or the last `spendlake verify`), `orphaned` (a source the config does not declare),
    `unlisted` (a partition on disk the ledger does not know: a ledger lost or rolled back)."""
    found = lake.cost_checks()
    checks = {(c.source, c.period): c.state for c in found}
    damaged = {(p["source"], p["billing_period"]): p["state"] for p in lake.read_state("verify").get("problems", [])}
    rows = []
    for entry in lake.ledger():
        check = "orphaned" if not lake.counts(entry.source) else checks.get(entry.key, "ok")
        if check == "ok":
            check = damaged.get(entry.key, "ok")
        base = {"source": entry.source, "billing_period": entry.billing_period, "delivery_id": entry.delivery_id,
                "ingested_at": entry.ingested_at, "final": entry.final, "check": check}
        for totals in entry.totals:
            rows.append({**base, "currency": totals.currency, "rows": totals.rows,
                         "billed_cost": exact_text(totals.billed_cost),
                         "effective_cost": exact_text(totals.effective_cost)})
        if not entry.totals:  # an empty snapshot still replaced its period
            rows.append({**base, "currency": None, "rows": 0, "billed_cost": "0", "effective_cost": "0"})
    rows += [{"source": c.source, "billing_period": c.period, "check": c.state} for c in found if c.state == "unlisted"]
    return [{key: row.get(key) for key in STATUS_COLUMNS} for row in rows]


def derived_damage(lake: Lake) -> list[str]:
    """One line for the derived files (rollups, placed parts, metric tops) that are damaged (by
    the read's check or the last `spendlake verify`) or gone while their record is kept, and the
    stray ones, naming the first and what to run; none when all are whole."""
    paths, found = derived_records.derived_files(lake), derived_records.problems(lake)
    periods = derived_sweep.ledger_folders(lake)  # after the listing, as verify
    strays = Counter(derived_sweep.stray_detail(path) for path in paths if derived_sweep.stray(path, periods))
    bad = [c for c in (derived_records.check(lake, path, found) for path in paths
                       if not derived_sweep.stray(path, periods)) if c.damaged] + derived_sweep.lost(lake)
    if not bad and not strays:
        return []
    if not bad:  # those of period folders, and metric tops, each said with why no reader uses them
        return ["; ".join(f"{count} derived file(s) stray: {detail}" for detail, count in strays.items())]
    stray = sum(strays.values())
    more = len(bad) - 1 + stray
    return [f"{len(bad)} derived file(s) damaged or lost{f' and {stray} stray' if stray else ''}: "
            f"{bad[0].sentence()}{f'; and {more} more' if more else ''}; queries compute them from the raw lines "
            "meanwhile: run `spendlake rollup` to write them again"]


def copies_skipped(lake: Lake) -> list[Note]:
    """Per source, the copies its last ingest skipped (files or manifests holding what another
    it reads holds: service.ingest.copies, connectors.aws_export), one line each source, and the
    stale ones (copies of what a file held before it changed) in a line of their own, and those
    changed while their original did not, whose period fails, in a third."""
    lines: list[Note] = []
    for source, record in sorted(lake.read_state("sources").items()):
        lines += _copies_line(source, record.get("copies"), "copied file(s) under its location skipped by its last "
                              "ingest (read once)", "the same as", "move copies out of the location to quiet this")
        lines += _copies_line(source, record.get("stale_copies"), "stale copied file(s) under its location skipped by "
                              "its last ingest (not read: the file each copied changed since)", "a copy of",
                              "delete them or copy the files again")
        lines += _copies_line(source, record.get("rewritten"), "copied file(s) under its location changed since they "
                              "were found while the file each copied did not (their period not committed: the lake "
                              "keeps what it held, and reading both would count it twice)", "a copy of", REWRITTEN_HINT)
        lines += _copies_line(source, record.get("shared"), "file(s) under its location another source reads too "
                              "(their rows counted by both)", "the same as", SHARED_HINT)
    return lines


def _copies_line(source: str, copies: dict | None, what: str, relation: str, advice: str) -> list[Note]:
    """One line naming the first of `copies` (copy -> original) and how many more, or none."""
    if not copies:
        return []
    (copy, original), *others = sorted(copies.items())
    more = f" and {len(others)} more" if others else ""
    return [Note("copies", f"source {source}: {len(copies)} {what}: {copy}, {relation} {original}{more}; {advice}",
                 source)]
