"""One delivery per (source, billing period), whatever the layout.

Files without a manifest (FOCUS, GCP and Azure exports, bare legacy CUR CSVs) come from
their connector as loose deliveries, one per file. Only a file's rows say which billing
periods it holds, so `plan` reads each new or changed file once for them (the connector's
own canonical SELECT, distinct billing periods: a Parquet file gives one column; a Parquet
file whose footer statistics settle them is not read: the connector's `footer_periods`) and
remembers them in `_state/file_periods.json` under the file's fingerprint (key, size,
version). Files are then joined by period: every file holding rows of a period is in that
period's delivery, whether the files sit in one folder, several, or Hive partitions by any
column; a file holding two periods joins them, so each file is read once per commit.
The delivery id is a fingerprint of its files' fingerprints: unchanged files give the same
id (re-ingesting is a no-op), and a period one of whose files is added, replaced or deleted
is read again as a whole (it grows or shrinks, never keeps stale rows). A file moved with the
location to another disk, its times kept, keeps the id it was delivered under (`_as_delivered`).

When all of a source's loose files are new to it (none surveyed before, none in a ledger
entry of the source: a first ingest), they are committed without a survey, as one delivery
read once (`Plan.together`; the connector must read each file as one part: `parts_are_files`).
Staging reports which periods each file held, each period's ledger entry gets the id and
files its joined delivery would have had after a survey, and the files' periods are
remembered, so the lake and the next ingest are as after a survey. Files of another
dataset found by the read leave the pass (`Plan.without`: the files after the first one found
are opened alone to find the others at once); if the pass fails, the run
surveys the files instead (service.ingest.billing), so a bad file fails alone. A source's
only loose file is committed the same way, whatever the connector.

A file holding the same bytes as another of the source is read once, the copy skipped
(service.ingest.copies); the digests read for it are remembered in `_state/file_digests.json`,
as are the files found holding another's rows in other bytes (service.ingest.row_copies).

Files holding another dataset (connectors.base.OtherDataset) or no rows are skipped, one
line each. A file that cannot be read fails alone, and the periods the ledger says it
delivered before are held back with it: their previous version stays, so no period is
committed without one of its files.
"""

from __future__ import annotations

import filecmp
import hashlib
import logging
import os
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace

import duckdb

from connectors.base import CostConnector, Delivery, OtherDataset
from connectors.file_versions import local_version, moved_alike, sampled_digest
from service.core.commit import StagedCosts, discard_costs
from service.core.errors import DataError, SpendlakeError
from service.core.files import files_named
from service.core.lake import Lake
from service.core.ledger import LedgerEntry
from service.ingest import copies, removed, row_copies
from service.ingest.survey import survey

log = logging.getLogger(__name__)

# {source: {file fingerprint: {"uri": …, "periods": [...], "skipped": str | None, "version", "sample"}}}
STATE = "file_periods"
DIGESTS = "file_digests"  # {source: {uri: {"version", "size", "sha256"[, "copy_of"]}}}: service.ingest.copies


@dataclass
class Plan:
    """What to ingest from one source: its manifest deliveries as the connector gave them and
    its loose files joined by period; the files skipped and the deliveries that fail now."""

    deliveries: list[Delivery] = field(default_factory=list)
    skipped: list[OtherDataset] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)  # files with a header and no rows
    failed: list[tuple[Delivery, SpendlakeError]] = field(default_factory=list)
    together: Delivery | None = None  # the new loose files as one delivery, committed without a survey
    members: tuple[Delivery, ...] = ()  # its files, in the order of its parts
    found: dict[str, dict] = field(default_factory=dict)  # member id → its state entry, once staged
    older: dict[str, str] = field(default_factory=dict)  # a file read, a stale copy of a file gone: its warning
    versions: dict[str, str | None] = field(default_factory=dict)  # each loose file's listed version (_as_delivered)
    moved: set[str] = field(default_factory=set)  # the files delivered under an id of another path (_as_delivered)
    removed: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # delivery id → period → its files gone

    def regroup(self, delivery: Delivery, staged: StagedCosts) -> StagedCosts:
        """The `together` delivery's staged periods as a survey would have delivered them:
        each entry with the id and files of its period's joined delivery; others as staged."""
        if delivery is not self.together:
            return staged
        if len(staged.part_periods) != len(self.members):
            discard_costs([staged])
            raise DataError(f"{len(staged.part_periods)} parts read from {len(self.members)} files",
                            where=self.members[0].files[0], hint="run ingest again")
        self.found.update((m.delivery_id, _entry(m, sorted(p), version=self.versions.get(m.files[0])))
                          for m, p in zip(self.members, staged.part_periods))
        if len(self.members) > 1 and staged.entries:
            self.empty.extend(m.files[0] for m in self.members if not self.found[m.delivery_id]["periods"])
        delivery_of: dict[str, Delivery] = {}
        for group in _by_period(self.members, self.found):
            periods = tuple(sorted({p for file in group for p in self.found[file.delivery_id]["periods"]}))
            delivery_of.update((period, joined(group, periods)) for period in periods)
        return replace(staged, entries=[replace(e, delivery_id=delivery_of[e.billing_period].delivery_id,
                                                files=delivery_of[e.billing_period].files) for e in staged.entries])

    def without(self, others: Sequence[OtherDataset]) -> Delivery | None:
        """The `together` delivery again without files found to hold another dataset (they are
        remembered as skipped, as a survey does); None if no other file would be left."""
        dataset = {other.uri: other.dataset for other in others}
        rest = tuple(m for m in self.members if m.files[0] not in dataset)
        if not rest or len(rest) == len(self.members):
            return None
        self.found.update((m.delivery_id, _entry(m, [], dataset[m.files[0]], self.versions.get(m.files[0])))
                          for m in self.members if m.files[0] in dataset)
        self.members, self.together = rest, joined(rest, None)
        return self.together

    def committed(self, lake: Lake, source: str, delivery: Delivery) -> None:
        """Remember the periods each file of a delivery committed without a survey held."""
        if delivery is self.together and self.found:
            state = read_cache(lake)
            state.setdefault(source, {}).update(self.found)
            lake.write_state(STATE, state)


def plan(lake: Lake, con: duckdb.DuckDBPyConnection, connector: CostConnector, source: str,
         deliveries: Sequence[Delivery], together: bool = True, accept_removed: bool = False) -> Plan:
    """`together`: new loose files may be committed without a survey (see above); False: they
    are surveyed (the run's second try when that failed), except a source's only file.
    `accept_removed`: a final period read again only because files of it are gone commits (removed.py)."""
    result = Plan(deliveries=[d for d in deliveries if not d.loose])
    if connector.files_one_delivery:
        result.deliveries, result.skipped = _without_row_copies(lake, connector, source, result.deliveries)
    loose = [d for d in deliveries if d.loose]
    if not loose:
        return result
    ledger = [e for e in lake.ledger() if e.source == source]
    result.versions = {f.files[0]: connector.listed_version(f.files[0]) for f in loose}
    listed = [uri for delivery in result.deliveries if not delivery.waiting for uri in delivery.files]
    found = _without_copies(lake, connector, source, loose, listed, ledger)
    loose, result.older = found.read, found.older
    result.skipped += found.skipped
    state = read_cache(lake)
    known: dict[str, dict] = state.get(source, {})
    ids = {f.files[0]: f.delivery_id for f in loose}
    loose, moved = _as_delivered(connector, loose, known, result.versions)
    result.moved = {f.files[0] for f in loose if f.delivery_id != ids[f.files[0]]}
    index: dict[str, dict] = {}
    held: dict[str, SpendlakeError] = {}  # period → why it waits
    for file in (d for d in deliveries if d.files[0] in found.rewritten):
        periods = {entry.billing_period for entry in ledger if found.rewritten[file.files[0]] in entry.files}
        held.update((period, CopyRewritten(file.files[0], found.rewritten[file.files[0]])) for period in periods)
        if not periods:  # the original committed no row (a header alone): no period to count twice
            loose.append(file)
    by_manifest = {period: d for d in result.deliveries if d.periods for period in d.periods}
    if not by_manifest and not found.rewritten and all(f.delivery_id not in known for f in loose) and (
            len(loose) == 1 or together and _unheld(loose, ledger, connector)):
        result.members = tuple(sorted(loose, key=lambda f: f.files[0]))
        result.together = joined(result.members, None)
        result.deliveries.append(result.together)
        loose = []
    for file in loose:
        version = result.versions.get(file.files[0])
        if file.delivery_id in moved:
            index[file.delivery_id] = moved[file.delivery_id]
        elif file.delivery_id in known:  # with its version and sample, a file recorded before they were (_as_delivered)
            record = known[file.delivery_id]
            index[file.delivery_id] = {"version": version, **record} if "sample" in record else \
                {"version": version, **record, "sample": _sample(file.files[0], version)}
        else:
            try:
                index[file.delivery_id] = _entry(file, survey(lake, con, connector, file), version=version)
            except OtherDataset as other:
                index[file.delivery_id] = _entry(file, [], other.dataset, version)
            except SpendlakeError as exc:
                result.failed.append((file, exc))
                for entry in ledger:
                    if set(entry.files) & set(file.files):
                        held.setdefault(entry.billing_period, DataError(
                            f"not committed: {file.files[0]}, a file of this period, cannot be read",
                            where=file.files[0], hint="fix or remove that file, then run ingest again"))
    for file in loose:
        entry = index.get(file.delivery_id)
        if entry is not None and entry["skipped"]:
            result.skipped.append(OtherDataset(file.files[0], entry["skipped"]))
        elif entry is not None and not entry["periods"]:
            result.empty.append(file.files[0])
    for group in _by_period(loose, index):
        periods = sorted({p for file in group for p in index[file.delivery_id]["periods"]})
        delivery = joined(group, tuple(periods))
        entries = [e for e in ledger if e.billing_period in periods]
        gone = removed.gone_from(entries, group, known, set(result.versions), joined)
        problem = next((held[p] for p in periods if p in held), None) or _beside(by_manifest, periods, group) or (
            None if accept_removed else removed.kept_final(gone, entries))
        result.removed[delivery.delivery_id] = gone
        if problem:
            result.failed.append((delivery, problem))
        else:
            result.deliveries.append(delivery)
    gone_files = {uri for delivery in result.removed.values() for files in delivery.values() for uri in files}
    index.update((fingerprint, record) for fingerprint, record in known.items()  # a shrink told again (removed.py)
                 if record["uri"] in gone_files and fingerprint not in index)
    if index != known:
        state[source] = index
        lake.write_state(STATE, state)
    return result


def read_cache(lake: Lake, name: str = STATE) -> dict:
    """What ingest knows of each file's periods (or digests, or an inventory source's files:
    service.ingest.inventory_inputs). Only a cache: a damaged one is read as empty (each file is
    read again) and written anew, instead of stopping every ingest."""
    try:
        return lake.read_state(name)
    except DataError as exc:
        log.warning("%s: %s; every file it knew is read again and the file written anew", exc.where, exc.message)
        lake.write_state(name, {})
        return {}


def _without_copies(lake: Lake, connector: CostConnector, source: str, loose: Sequence[Delivery],
                    listed: Sequence[str], ledger: Sequence[LedgerEntry]) -> copies.Copies:
    """The loose files to read, one of each content, and the copies skipped (service.ingest.copies),
    with the digests it read remembered."""
    state = read_cache(lake, DIGESTS)
    known: dict[str, dict] = state.get(source, {})
    loose, by_rows, rows_kept = row_copies.skipped(connector, loose, known)
    with ExitStack() as stack:
        scratch: list = []

        def digest(uri: str) -> str:
            if not scratch:  # made for the first file read, if any
                scratch.append(stack.enter_context(lake.scratch()))
            return connector.content_digest(uri, scratch[0])

        by_bytes = {uri: was for uri, was in known.items() if row_copies.ROWS_OF not in was}
        found = copies.find(connector, loose, listed, {uri for entry in ledger for uri in entry.files}, by_bytes, digest)
    found.skipped += by_rows
    found.digests.update(rows_kept)
    if found.digests != known:
        state[source] = found.digests
        lake.write_state(DIGESTS, state)
    return found


def _without_row_copies(lake: Lake, connector: CostConnector, source: str,
                        deliveries: Sequence[Delivery]) -> tuple[list[Delivery], list[OtherDataset]]:
    """The deliveries of a connector delivering all its files as one (files_one_delivery) less the
    files found before holding another's rows (service.ingest.row_copies), each told; the records of
    a copy changed, or of an original gone, dropped, so that file is read again."""
    state = read_cache(lake, DIGESTS)
    known: dict[str, dict] = state.get(source, {})
    files = [Delivery(uri, None, (uri,), loose=True) for delivery in deliveries for uri in delivery.files]
    _, told, kept = row_copies.skipped(connector, files, known)
    if kept != known:
        state[source] = kept
        lake.write_state(DIGESTS, state)
    copies = {other.uri for other in told}
    return [connector.delivery_without(d, copies) if copies.intersection(d.files) else d for d in deliveries], told


def remember_row_copies(lake: Lake, source: str, records: dict[str, dict]) -> None:
    """Remember files found holding another's rows (service.ingest.row_copies): the next plan skips them."""
    state = read_cache(lake, DIGESTS)
    state.setdefault(source, {}).update(records)
    lake.write_state(DIGESTS, state)


class CopyRewritten(DataError):
    """A period held back: `copy`, found a copy of `original`, changed since while `original` did not."""

    def __init__(self, copy: str, original: str):
        super().__init__(f"held the same bytes as {original} when found, a copy of it, and changed since while "
                         f"{original} did not: one of the two is a copy or backup, and reading both would count their "
                         "period twice; not committed", where=copy, hint=copies.REWRITTEN_HINT)
        self.copy, self.original = copy, original


def _beside(by_manifest: dict[str, Delivery], periods: Sequence[str], group: Sequence[Delivery]) -> DataError | None:
    """Files in no manifest holding a period a manifest delivers (a bare legacy CUR CSV beside
    the report's folders) would replace that delivery and be replaced by it run after run: they
    fail, the manifest's delivery stays the period's."""
    period = next((p for p in periods if p in by_manifest), None)
    if period is None:
        return None
    delivery = by_manifest[period]
    return DataError(f"{period} is delivered by a manifest (delivery {delivery.delivery_id}: "
                     f"{files_named(delivery.files, '', shown=1)}) and by {len(group)} file(s) in no manifest, which would "
                     "replace each other", where=files_named([f.files[0] for f in group], ""),
                     hint="move the file(s) in no manifest out of the location, or give them a source of their own")


def joined(files: Sequence[Delivery], periods: tuple[str, ...] | None) -> Delivery:
    """One delivery of these loose files. A single file keeps its own fingerprint as the id."""
    ids = sorted(f.delivery_id for f in files)
    delivery_id = ids[0] if len(ids) == 1 else "sha256:" + hashlib.sha256("\n".join(ids).encode()).hexdigest()[:32]
    return Delivery(delivery_id, periods, tuple(sorted(uri for f in files for uri in f.files)))


def _unheld(loose: Sequence[Delivery], ledger: Sequence[LedgerEntry], connector: CostConnector) -> bool:
    """No ledger entry delivered any of these files, and the connector reads each as one part."""
    uris = {uri for file in loose for uri in file.files}
    return connector.parts_are_files and not any(uris & set(e.files) for e in ledger)


def _entry(file: Delivery, periods: list[str], skipped: str | None = None, version: str | None = None) -> dict:
    uri = file.files[0]
    return {"uri": uri, "periods": periods, "skipped": skipped, "version": version, "sample": _sample(uri, version)}


def _sample(uri: str, version: str | None) -> str | None:
    """A local file's `sampled_digest`, by which a file seeming moved is told from another (_as_delivered)."""
    return sampled_digest(uri) if version and not uri.startswith("s3://") else None


def _as_delivered(connector: CostConnector, loose: Sequence[Delivery], known: dict[str, dict],
                  versions: dict[str, str | None]) -> tuple[list[Delivery], dict[str, dict]]:
    """The loose files, each under the id it was delivered under, and the records of those found
    moved now. A local file's fingerprint holds its inode and change time, so the location copied
    with its times to another disk (`cp -a`, `rsync -a`, `mv` across file systems) made every
    period new: a file at the same path under the location, of the size and modification time
    of a file recorded there and gone since, and of its sampled bytes (a record without them: not
    known, read again), is that file moved (`moved_alike`). It keeps its
    recorded id and periods (its period is "unchanged"; billing.py moves the ledger's files), the
    record marked `moved` with its own fingerprint, by which later runs know it."""
    aliases = {record["moved"]: old for old, record in known.items() if record.get("moved")}
    listed = set(versions)
    gone = {old: record for old, record in known.items() if record["uri"] not in listed and record.get("version")}
    ending: dict[int, dict[str, list[str]]] = {}  # n → the gone records by their path's last n parts

    def ending_in(tail: str) -> list[str]:
        n = tail.count("/")
        if n not in ending:
            ending[n] = {}
            for old, record in gone.items():
                ending[n].setdefault("/" + "/".join(record["uri"].split("/")[-n:]), []).append(old)
        return ending[n].get(tail, [])

    moved: dict[str, dict] = {}
    for file in loose:
        uri, version = file.files[0], versions.get(file.files[0])
        if file.delivery_id in known or file.delivery_id in aliases or not version or uri.startswith("s3://"):
            continue  # an S3 object's fingerprint holds its key under the location and its ETag: it moves as it is
        location = connector.config.location.rstrip("/")
        tail = uri[len(location):] if uri.startswith(location + "/") else "/" + os.path.basename(uri)
        same = [old for old in ending_in(tail) if old in gone and moved_alike(gone[old]["version"], version)]
        if len(same) == 1 and _same_bytes(gone[same[0]], uri):
            aliases[file.delivery_id] = same[0]
            moved[same[0]] = {**gone.pop(same[0]), "uri": uri, "version": version, "moved": file.delivery_id}
    return [replace(f, delivery_id=aliases[f.delivery_id]) if f.delivery_id in aliases else f for f in loose], moved


def _same_bytes(record: dict, uri: str) -> bool:
    """Whether the file at `uri` holds the bytes of the gone one `record` describes (of its size and
    modification time): its sampled bytes equal, and, where the original is still at its path as it
    was read (`cp -a` to the new location, not `mv`), every byte. Where the original is gone, the
    sample is all there is to compare: a change keeping the size and the modification time to the
    nanosecond and lying wholly outside the sampled bytes (connectors.file_versions.sampled_digest) is
    taken for the file moved. An original changed since is no witness: the file is read again."""
    if not record.get("sample") or record["sample"] != sampled_digest(uri):
        return False
    now = local_version(record["uri"])
    return now is None or (now == record["version"] and filecmp.cmp(record["uri"], uri, shallow=False))


def _by_period(files: Sequence[Delivery], index: dict[str, dict]) -> list[list[Delivery]]:
    """The files grouped so that files sharing a period are in one group (connected by
    period: a file holding two periods joins their groups)."""
    parent: dict[str, str] = {}

    def root(period: str) -> str:
        while parent.setdefault(period, period) != period:
            parent[period] = parent[parent[period]]
            period = parent[period]
        return period

    holding = [(f, index[f.delivery_id]["periods"]) for f in files if index.get(f.delivery_id, {}).get("periods")]
    for _, periods in holding:
        for period in periods[1:]:
            parent[root(period)] = root(periods[0])
    groups: dict[str, list[Delivery]] = {}
    for file, periods in holding:
        groups.setdefault(root(periods[0]), []).append(file)
    return sorted(groups.values(), key=lambda g: min(p for f in g for p in index[f.delivery_id]["periods"]))
