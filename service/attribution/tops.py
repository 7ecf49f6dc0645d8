"""Metric tops: what a `/metrics` scrape shows of the lake, computed when the lake changes.

A scrape shows spend (top-N (team, project) pairs and experiments per window, unallocated
shares: service/attribution/spend_tops.py), shared GPU clusters (top-N runs, idle share per
cluster: cluster_tops.py) and commitments (unused and utilization by type and owning team:
commitment_tops.py). Each needs the whole window summed or allocated (a million experiments,
every job of a cluster), so the writers of the lake compute them once per lake state:
`build_tops`, after the rollups, under the ingest lock. The answer is a few hundred rows:
`<lake>/metric_tops/source=all/config=<owner>/<data>.parquet`, where `owner` is the
attribution config and `top_n`, and `data` the ledger's deliveries and the inventory tags
and job snapshots attribution read, so the name says which lake state it describes. A build
removes its config's files of other states at once and other configs' files of earlier states
(replaced by a SIGHUP or a restart), and those named as no build names them (a folder renamed or
copied in: service/core/derived_sweep.py), a grace after it found them.
`ScrapeTops` (the scrape) reads that file once; finding none for the lake's state, it
computes each group for that scrape only, writing nothing, unless a build or a service job
is at work (then it shows the previous state's tops).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from service.attribution.cluster_tops import cluster_tops
from service.attribution.commitment_tops import commitment_tops
from service.attribution.compute import RollupSession
from service.attribution.jobs import jobs_basis
from service.attribution.metric_top import GROUP_OF, GROUPS, Top, snapshot_anchor
from service.attribution.rollup_build import ROLLUP_GRACE, SUPERSEDED_STATE, superseded_since
from service.attribution.rollup_versions import ROLLUP_FORMAT, inventory_basis, inventory_latest
from service.attribution.spend_tops import spend_tops
from service.core import derived_records, derived_sweep
from service.core.config import Config
from service.core.coverage import parse_utc, snapshot_data_end
from service.core.errors import DataError
from service.core.files import listed
from service.core.lake import Lake
from service.core.snapshot import Snapshot, read_consistently
from service.core.timewindow import iso_utc

log = logging.getLogger(__name__)

TOPS_TABLE = derived_records.TOPS_TABLE  # "metric_tops"
TOPS_FORMAT = "6"  # bump when the file's columns or meaning change (2: clusters, commitments; 3: idle unpooled;
# 4: a run's labels (run, folded); 5: spend's and experiments' labels end in folded too; 6: commitments' too)
# The stored file's columns, from one bound list each (`build_tops`)
COLUMNS = ("unnest($1::TIMESTAMPTZ[]) AS anchor, unnest($2::VARCHAR[]) AS family, unnest($3::VARCHAR[]) AS \"window\", "
           "unnest($4::VARCHAR[][]) AS labels, unnest($5::VARCHAR[]) AS value")


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tops_owner(config: Config) -> str:
    """Which config the stored tops are of: what decides attribution, and how many tops."""
    return _hash(f"{TOPS_FORMAT}|{config.attribution.fingerprint()}|{config.service.top_n}")


def tops_folder(lake: Lake, config: Config | str) -> Path:
    """Where the tops of `config` (or of the config whose `tops_owner` it is) are, one file per lake state."""
    owner = config if isinstance(config, str) else tops_owner(config)
    return lake.partition_file(TOPS_TABLE, [("source", "all"), ("config", owner)]).parent


def tops_file(lake: Lake, config: Config, snapshot: Snapshot) -> Path:
    """Where the tops of `config` for the lake state `snapshot` (and today's inventory) are."""
    return tops_folder(lake, config) / f"{_state_name(snapshot, inventory_latest(lake, config.attribution, snapshot.tables))}.parquet"


def _state_name(snapshot: Snapshot, inventory: dict[str, str]) -> str:
    deliveries = ";".join(sorted(f"{c.source}|{c.period}|{c.entry.delivery_id}|{c.entry.ingested_at}|{c.entry.rows}"
                                 for c in snapshot.checks))
    return _hash(f"{ROLLUP_FORMAT}|{deliveries}|{inventory_basis(inventory)}")


class ScrapeTops:
    """The tops one scrape shows: the file stored for the lake's state, read once (on the
    first `group` call); a group is computed for this scrape only when none is stored. The
    windows' end and the numbers always come from one lake state: an end taken before an
    ingest committed, over the data after it, would cut the newest hours off.

    A scrape never computes beside other heavy work (at a million values that takes longer
    than a scrape may, and a second DuckDB instance of up to the writer's limit): while a
    writer holds the lake (it stores the new state's tops before it lets go), or while one
    of the service's jobs holds `turn` (service/serve/scheduler.py: a report may be rolling
    a month up), it shows the previous state's stored tops, or none when this config has
    none yet (`current` False). Otherwise it computes holding `turn`, so no job starts
    beside it. With `previous_when_unreadable` (the service's scrape), a lake state that cannot
    be read (a damaged partition) shows the previous state's stored tops too, and `unreadable`
    says why, instead of raising. `earlier`: the `tops_owner` of the configs a SIGHUP replaced, newest
    first, or the one the service ran before a restart: while this
    config has no tops stored yet, the previous state's are theirs (a reload changing attribution
    emptied the cost families until its build was done, and cost alerts resolved); not on a lake that
    cannot be read."""

    def __init__(self, lake: Lake, config: Config, now: datetime, turn: threading.Lock | None = None, *,
                 previous_when_unreadable: bool = False, earlier: tuple[str, ...] = ()):
        self.lake, self.config, self.now, self.turn = lake, config, now, turn
        self.previous_when_unreadable = previous_when_unreadable
        self.earlier = earlier
        self._stored: list[Top] | None = None
        self._looked = False
        # False while the previous state's tops (or none) are shown instead of the current ones
        self.current = True
        self.unreadable: DataError | None = None

    def group(self, name: str) -> list[Top]:
        if not self._looked:
            try:
                self._stored = read_consistently(self.lake, self._stored_tops)
            except DataError as exc:
                if not self.previous_when_unreadable:
                    raise
                self.unreadable = exc
                self._show_previous("the lake cannot be read", replaced=False)
            self._looked = True
            if self._stored is None and self.lake.writing():
                self._show_previous("a writer holds the lake")
        tops = self._stored
        if tops is None:
            tops = self._compute_in_turn(name)
        if tops is None:
            self._show_previous("a service job is running")
            tops = self._stored
        return [top for top in tops if GROUP_OF.get(top.family) == name]

    def _compute_in_turn(self, name: str) -> list[Top] | None:
        """The group computed for this scrape while holding the jobs' turn; None when a job has it."""
        if self.turn is not None and not self.turn.acquire(blocking=False):
            return None
        try:
            log.info("metrics: no stored tops for this lake state (the next ingest or `spendlake rollup` "
                     "stores them); computing %s for this scrape", name)
            return read_consistently(self.lake, lambda snap: _compute(
                self.lake, self.config, snapshot_anchor(self.lake, snap, self.now), (name,), snap))
        finally:
            if self.turn is not None:
                self.turn.release()

    def _show_previous(self, why: str, replaced: bool = True) -> None:
        """`replaced`: the replaced configs' tops may stand in, for as long as a build or job takes; not
        while the lake cannot be read (until it is repaired: a restart shows none either)."""
        self.current = False
        for owner, whose in ((self.config, "the previous state's"),
                             *((owner, "the replaced config's") for owner in self.earlier if replaced)):
            self._stored = previous_tops(self.lake, owner)
            if self._stored is not None:
                break
        else:
            self._stored, whose = [], "none"
        log.info("metrics: no stored tops for this lake state and %s: showing %s (%d samples) "
                 "instead of computing them beside it", why, whose, len(self._stored))

    def _stored_tops(self, snapshot: Snapshot) -> list[Top] | None:
        return stored_tops(self.lake, self.config, snapshot, snapshot_anchor(self.lake, snapshot, self.now))


def stored_tops(lake: Lake, config: Config, snapshot: Snapshot, end: datetime) -> list[Top] | None:
    """The tops the last build stored for the lake state `snapshot` and `end`, or None."""
    table = _read_tops(lake, tops_file(lake, config, snapshot), filters=[("anchor", "=", end)])
    return _tops_of(table) if table is not None and table.num_rows else None


def previous_tops(lake: Lake, config: Config | str) -> list[Top] | None:
    """The tops of `config` (or of a `tops_owner`) stored last, for whichever lake state (None: none stored)."""
    for path in sorted(listed(tops_folder(lake, config), "*.parquet"), key=_modified, reverse=True):
        table = _read_tops(lake, path)
        if table is not None:
            return _tops_of(table)
    return None


def _read_tops(lake: Lake, path: Path, **options) -> pa.Table | None:
    """A stored tops file; None when there is none (not built yet, superseded), it does not
    match its record (derived_records) or it cannot be read: derived data, computed from the
    lake instead (said with -v) and written again by the next build."""
    check = derived_records.check(lake, path)
    if check.state == "missing":
        return None
    try:
        if check.ok:
            return pq.read_table(path, **options)
        why = check.reason
    except FileNotFoundError:
        return None
    except (pa.ArrowException, OSError) as exc:
        why = str(exc).splitlines()[0][:200]
    log.info("metrics: the stored tops %s are %s (%s): computed from the lake instead; %s", path,
             "unrecorded" if check.state == "unrecorded" else "damaged", why, derived_records.REPAIR)
    return None


def _tops_of(table: pa.Table) -> list[Top]:
    return [Top(row["anchor"], row["family"], row["window"], tuple(row["labels"]), Decimal(row["value"]))
            for row in table.to_pylist()]


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def read_tops(lake: Lake, config: Config, now: datetime, group: str = "spend") -> list[Top]:
    """One group's tops for this lake state: stored, else computed now (nothing written)."""
    return ScrapeTops(lake, config, now).group(group)


def build_tops(lake: Lake, config: Config, *, grace: timedelta = ROLLUP_GRACE, now: datetime | None = None) -> bool:
    """Store the tops of the lake's current state unless stored, and remove this config's tops
    of other states (a scrape that finds its file gone computes in memory) and, `grace` after,
    other configs' (`_drop_replaced`). Call only while holding the ingest lock. True when they were computed."""
    snapshot = lake.snapshot()
    target = tops_file(lake, config, snapshot)
    owner = target.parent.name.split("=", 1)[1]
    end = snapshot_data_end(lake, snapshot)
    built = end is not None and not _whole(lake, target)  # none yet, or a damaged one: written again
    if built:
        tops = compute_tops(lake, config, end, GROUPS, snapshot)
        columns = [[t.anchor for t in tops], [t.family for t in tops], [t.window for t in tops],
                   [list(t.labels) for t in tops], [format(t.value, "f") for t in tops]]
        con = lake.connect()
        try:  # bound as lists: pyarrow imports pandas (0.2 CPU s) for a first array built from Python objects
            rows = con.sql(f"SELECT {COLUMNS}", params=columns)
            lake.commit_snapshot(con, rows, table=TOPS_TABLE, source="all", key="config", value=owner,
                                 version=target.stem)
        finally:
            con.close()
    derived_records.drop_files(lake.root, [f for f in target.parent.glob("*.parquet") if f != target])
    if end is not None:  # this config's tops of the current state stored: the others' are superseded
        _drop_replaced(lake, target, snapshot, grace, now or datetime.now(timezone.utc))
    return built


def _drop_replaced(lake: Lake, target: Path, snapshot: Snapshot, grace: timedelta, now: datetime) -> None:
    """Remove other configs' tops of earlier lake states (a config a SIGHUP or restart replaced, whose tops a
    scrape showed while this one's were built) by the rollup versions' rule (rollup_build.py): superseded
    since a build of a newer state found them, for `grace`, and already found so by an earlier build, so a
    scrape that picked one up reads it whole (one that finds it gone shows the next, or none). Another
    config's tops of the current state (with or without `clusters:`'s job snapshots) are kept, as its
    current rollups are: a config used beside this one on the lake (`spendlake rollup --config`) reads them;
    a file named as no build names them (a folder renamed or copied in: derived_sweep.stray) is of none.
    Then the records of tops files gone (`lost`: a folder renamed away) go too."""
    derived_sweep.forget_lost(lake, [TOPS_TABLE])
    replaced: dict[Path, list[Path]] = {}
    for file in listed(lake.root / TOPS_TABLE, "source=*/*=*/*.parquet"):
        if file.parent != target.parent:
            replaced.setdefault(file.parent, []).append(file)
    if not replaced:
        return
    tags = inventory_latest(lake)
    current = {_state_name(snapshot, tags), _state_name(snapshot, {**jobs_basis(lake), **tags})}
    since, _ = superseded_since(lake)  # a damaged state file: the rollup build before this one said it
    earlier = set(since)
    for folder, files in replaced.items():
        gone = []
        for file in files:
            key = str(file.relative_to(lake.root).with_suffix(""))
            if file.stem in current and derived_sweep.tops_named(file):
                since.pop(key, None)
                continue
            found = min(parse_utc(since[key]), now) if key in earlier else now
            since[key] = iso_utc(found)
            if key in earlier and found <= now - grace:
                gone.append(file)
        derived_records.drop_files(lake.root, gone)
        for empty in (folder, folder.parent):  # a `source=` folder renamed or copied in, too
            if empty != target.parent.parent:
                derived_sweep.remove_empty(empty)
    lake.write_state(SUPERSEDED_STATE, {"since": {key: at for key, at in sorted(since.items())
                                                  if (lake.root / f"{key}.parquet").exists()}})


def _whole(lake: Lake, path: Path) -> bool:
    """True when the stored tops file matches its record and reads whole (through DuckDB:
    pyarrow imports pandas)."""
    if not derived_records.check(lake, path).ok:
        return False
    with lake.connect() as con:
        try:
            con.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
        except duckdb.Error:
            return False
    return True


def compute_tops(lake: Lake, config: Config, end: datetime, groups: Iterable[str] = GROUPS,
                 snapshot: Snapshot | None = None) -> list[Top]:
    """The tops of `groups` for the windows ending at `end`, from one state of the lake;
    writes nothing. The first row (family `anchor`) says they were computed."""
    if snapshot is not None:
        return _compute(lake, config, end, tuple(groups), snapshot)
    return read_consistently(lake, lambda snap: _compute(lake, config, end, tuple(groups), snap))


def _compute(lake: Lake, config: Config, end: datetime, groups: tuple[str, ...], snapshot: Snapshot) -> list[Top]:
    tops = [Top(end, "anchor", "", (), Decimal(0))]
    if not snapshot.checks:
        return tops
    if "commitments" in groups:
        tops += commitment_tops(lake, config, end, snapshot)
    if "spend" in groups or "clusters" in groups:
        session = RollupSession(lake, config.attribution, snapshot)
        try:
            if "spend" in groups:
                tops += spend_tops(session, config, end)
            if "clusters" in groups:
                tops += cluster_tops(session, config, end)
        finally:
            session.con.close()
    return tops
