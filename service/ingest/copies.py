"""Which of a source's loose files are copies of another of its files, read once.

A file holding the same content as another of the source (the SHA-256 of connectors.content:
gzipped or not, with a byte order mark or CRLF line ends or not; a period's folder copied beside
the original, `cp -r 2024-05 2024-05-restored`, or an export restored under a new name) is the
same delivery: read once, the copy skipped with one line naming both, so no period sums it twice;
under other values of a Hive folder the connector reads as a column the file lacks
(`SubAccountId=a`, `=b`) the same content is other rows (`content`).
The original is a file a manifest delivery lists, else one a ledger entry holds, else one never
found a copy, else the earliest written (a copy is written after it), else, written at once
(`cp -a` keeps the times), the one of the shortest path: copies are put in a folder more or
under a longer name (`2024-05-restored`, `backup/2024-05`), and sort before it by path; then
the first by path. Chosen once, when both are first found: the copy's record keeps it. A
source's only file is read for nothing; else each file's head once (its first text's digest),
and only files of one head whole for their digest, an unchanged file once (service.ingest.digests).
A bare file holding the bytes of a file a manifest lists is a copy of it too.

A copy stays one while its bytes are those it had when found (`copy_of` in its digest): its
original corrected or re-exported later leaves it a stale copy, still skipped (said so, naming
both), never a second file of the period beside the correction; so does a copy of it, or it
moved under the location (the same bytes and size as a copy gone since), and when its original is
renamed or moved under it (a new file of the bytes remembered for the original). A copy
rewritten itself while its original did not change fails its period (`rewritten`: which of
the two is the copy was a guess by time); one whose original is gone from the listing holds
the only rows left and counts, unless a manifest listed that original (`of_manifest`): the manifest's delivery
of its period is read, and the copy stays a stale one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from connectors.base import CostConnector, Delivery, OtherDataset
from connectors.file_copies import SAME, written_first
from connectors.file_facts import hive_partitions
from service.core.errors import SourceError
from service.ingest.digests import Digests

# What to do about a copy rewritten beside its unchanged original (ingest fails its period; status names it).
REWRITTEN_HINT = "delete the copy or backup, or move it out of the location (a file of its own: give it a new name)"

STALE = ("a stale copy of {original} (the same bytes when it was found, that file changed since: its rows are not "
         "read; delete the copy or copy the file again)")
OLDER = ("{copy}: read, its rows the only ones left of {original}, gone since; but it was a stale copy of that file, "
         "corrected after the copy was made: these rows are an older version of a deleted file (put the corrected "
         "file back, or delete the copy)")
GONE = ("a stale copy of {original} (a part its manifest listed, gone since: its rows are not read, the manifest's "
        "delivery of its period is; delete the copy)")


@dataclass
class Copies:
    read: list[Delivery]  # the loose files to read, one of each content
    skipped: list[OtherDataset] = field(default_factory=list)  # the copies, each naming its original
    digests: dict[str, dict] = field(default_factory=dict)  # uri → {"version", "size", "sha256"[, "copy_of"]}
    rewritten: dict[str, str] = field(default_factory=dict)  # a copy changed, its original not: uri → original
    older: dict[str, str] = field(default_factory=dict)  # read, a stale copy of a file gone since: uri → warning


def find(connector: CostConnector, loose: Sequence[Delivery], listed: Sequence[str], held: Collection[str],
         known: dict[str, dict], digest: Callable[[str], str]) -> Copies:
    """`listed`: the files manifest deliveries list; `held`: those ledger entries hold; `known`:
    the digests remembered last time; `digest`: a file's SHA-256, read."""
    return _Survey(connector, loose, listed, held, Digests(connector, known, digest, connector.content_head)).copies()


class _Survey:
    """One source's loose files, told apart: which to read, which are copies (stale or not), and
    which fail their period; each step below one of those questions."""

    def __init__(self, connector: CostConnector, loose: Sequence[Delivery], listed: Sequence[str],
                 held: Collection[str], cache: Digests):
        self.connector, self.loose, self.listed, self.held, self.cache = connector, loose, listed, held, cache
        self.files = {file.files[0]: file for file in loose}
        self.by_manifest = set(listed)
        self.known = _followed(connector, self.files, cache)
        self.digests: dict[str, dict] = {}  # the files the copy check reads → their record

    def size(self, uri: str) -> int | None:
        return self.connector.listed_size(uri)

    def content(self, uri: str) -> tuple:
        # a file's rows are its content and the Hive values its folders give the columns it lacks
        # and the connector reads: the same file under SubAccountId=a and SubAccountId=b is two
        # accounts' lines, under BillingPeriod=2024-09 or beside a SubAccountId column it is one
        hive = [(key.lower(), value) for key, value in hive_partitions(uri) if self.connector.hive_reaches(key)]
        if hive:
            own = set(self.cache.head(uri)[1])
            hive = [(key, value) for key, value in hive if key not in own]
        return self.digests[uri]["sha256"], tuple(sorted(hive))

    def copies(self) -> Copies:
        older = self.older()
        alike = self.alike()
        were, moved, gone = self.found_before()
        # a copy's loose original read too, so its digest is remembered should it be renamed (_followed)
        # and tells whether it changed: a copy changed while its original did not is no correction
        known = self.known
        recorded = {uri: known[uri] for uri in self.files if (known.get(uri) or {}).get("copy_of") in self.files
                    and known[uri]["copy_of"] in known and not known[uri].get("of_manifest")}
        of_loose = [was["copy_of"] for was in [*were.values(), *recorded.values()] if was["copy_of"] in self.files]
        self.digests = {uri: self.cache.record(uri) for uri in dict.fromkeys([*alike, *were, *moved, *of_loose])}
        were.update(self.moved_copies(moved, gone))
        originals = self.originals(alike, were)
        rewritten = self.rewritten(recorded)
        unread = originals.keys() | rewritten.keys()
        result = Copies([file for file in self.loose if file.files[0] not in unread], rewritten=rewritten, older=older)
        result.skipped = self.told(originals)
        # a file of no version is read each time, unless it is a copy: its copy_of is kept; the digests
        # read for no copy are kept too, so an unchanged file is read once (service.ingest.digests)
        result.digests = self.cache.kept([*self.listed, *self.files])
        result.digests.update((uri, d) for uri, d in self.digests.items() if d["version"] or "copy_of" in d)
        result.digests.update((uri, self.known[uri]) for uri in rewritten)  # so until one of the two is gone
        # so the corrected original put back (there or renamed) leaves the copy stale again
        result.digests.update((key, self.known[key]) for uri in older for key in (uri, self.known[uri]["copy_of"])
                              if key in self.known)
        return result

    def older(self) -> dict[str, str]:
        """A stale copy whose corrected original is gone holds the only rows left, an older version: its warning."""
        return {uri: OLDER.format(copy=uri, original=was["copy_of"]) for uri, was in self.known.items()
                if uri in self.files and was.get("copy_of") and not was.get("of_manifest")
                and self.size(was["copy_of"]) is None and self.size(uri) == was["size"]
                and (self.known.get(was["copy_of"]) or was).get("sha256") != was["sha256"]}

    def alike(self) -> list[str]:
        """The loose files of a head another file of the source (loose or a manifest's) has too
        (connectors.content: the digest of its first text, gzipped or not), and those files: one
        file alone is not looked at."""
        uris = [uri for uri in dict.fromkeys([*self.listed, *self.files]) if self.size(uri) is not None]
        if len(uris) < 2 or not any(uri in self.files for uri in uris):
            return []
        by_head: dict[str, list[str]] = defaultdict(list)
        for uri in uris:
            try:
                by_head[self.cache.head(uri)[0]].append(uri)
            except SourceError:  # gone or unreadable since it was listed: its own read names it, in its period
                continue
        return [uri for group in by_head.values() if len(group) > 1 and any(u in self.files for u in group)
                for uri in group]

    def still_a_copy(self, was: dict) -> bool:
        return bool(was.get("of_manifest") or self.size(was["copy_of"]) is not None)

    def found_before(self) -> tuple[dict[str, dict], list[str], dict[str, dict]]:
        """The files found a copy before, of the same size still, their original still there or a
        manifest's part (its period is the manifest's): read for their digest only if their version
        changed (a `cp -a` made afresh), to tell whether each is the same copy; and the new files of
        a gone copy's size, read to tell whether one is that copy moved (`mv 2024-05-restored
        2024-05-old`), with those gone copies."""
        known = self.known
        were = {uri: known[uri] for uri in self.files if (known.get(uri) or {}).get("copy_of")
                and self.size(uri) == known[uri]["size"] and self.still_a_copy(known[uri])}
        gone = {uri: was for uri, was in known.items() if was.get("copy_of") and uri not in self.files
                and self.still_a_copy(was)}
        moved = [uri for uri in self.files if uri not in known
                 and any(self.size(uri) == was["size"] for was in gone.values())]
        return were, moved, gone

    def moved_copies(self, moved: list[str], gone: dict[str, dict]) -> dict[str, dict]:
        """Each new file holding a gone copy's bytes under the same Hive values → that copy's record."""
        found = {}
        for uri in moved:
            was = next((was for old, was in gone.items() if was["sha256"] == self.digests[uri]["sha256"]
                        and hive_partitions(old) == hive_partitions(uri)), None)
            if was is not None:
                found[uri] = was
        return found

    def originals(self, alike: list[str], were: dict[str, dict]) -> dict[str, str]:
        """Each copy → its original: a copy found before and unchanged stays a copy of its original;
        of files of one content the original is the first in the order the module's docstring says."""
        unchanged = {uri: was["copy_of"] for uri, was in were.items() if self.digests[uri]["sha256"] == was["sha256"]}
        stale = {uri for uri, original in unchanged.items()
                 if original not in self.digests or self.content(original) != self.content(uri)}
        by_manifest, known, modified = self.by_manifest, self.known, self.connector.listed_modified
        kept: dict[tuple, str] = {}  # a stale copy first: a copy of it is a stale copy of its original
        for uri in sorted(dict.fromkeys([*alike, *unchanged]), key=lambda u: (
                u not in stale, u not in by_manifest, u not in self.held,
                u in were or bool((known.get(u) or {}).get("copy_of")), *written_first(u, modified(u)))):
            kept.setdefault(self.content(uri), uri)
        originals = dict(unchanged)
        for uri in (u for u in alike if u in self.files and u not in unchanged):
            original = unchanged.get(kept[self.content(uri)], kept[self.content(uri)])  # a copy's copy: of its original
            if original != uri:
                originals[uri] = original
        return originals

    def rewritten(self, recorded: dict[str, dict]) -> dict[str, str]:
        """The exporter rewrote the original with the same bytes after the backup was made: the
        backup, older, was taken for the original, and the real original's correction would count
        beside it. A copy changed while its original did not → that original."""
        def same(uri: str, was: dict) -> bool:
            return self.size(uri) == was["size"] and self.digests[uri]["sha256"] == was["sha256"]

        return {uri: was["copy_of"] for uri, was in recorded.items() if not same(uri, was)
                and same(was["copy_of"], self.known[was["copy_of"]])
                and not (uri in self.digests and self.content(uri) == self.content(was["copy_of"]))}  # copied again

    def told(self, originals: dict[str, str]) -> list[OtherDataset]:
        """Each copy skipped, in one line naming its original; its record marked a copy."""
        skipped = []
        for uri, original in sorted(originals.items()):
            self.digests[uri]["copy_of"] = original
            if original in self.by_manifest or (self.known.get(uri) or {}).get("of_manifest"):
                self.digests[uri]["of_manifest"] = True
            if original in self.digests and self.content(original) == self.content(uri):
                same = "bytes" if self.digests[original]["sha256"] == self.digests[uri]["sha256"] \
                    and self.size(original) == self.size(uri) else "content"
                skipped.append(OtherDataset(uri, SAME.format(same=same, original=original), original))
            else:
                why = STALE if self.size(original) is not None else GONE
                skipped.append(OtherDataset(uri, why.format(original=original), original, stale=True))
        return skipped


def _followed(connector: CostConnector, files: dict, cache: Digests) -> dict[str, dict]:
    """The digests remembered with a copy's original renamed or moved under the location (`mv
    2024-05 2024-05-final`, part-0 to part-1) followed: a new file holding the bytes remembered for
    an original gone from the listing, under the same Hive values, is that original, so a stale
    copy of it stays stale rather than counting beside it."""
    known = cache.known
    gone = {was["copy_of"] for was in known.values() if was.get("copy_of") and not was.get("of_manifest")
            and connector.listed_size(was["copy_of"]) is None and was["copy_of"] in known}
    moved: dict[str, str] = {}

    def new(uri: str) -> bool:  # since the last run, or rewritten: a copy's record is never the original's
        was = known.get(uri)
        return was is None or "copy_of" not in was and not cache.unchanged(uri, cache.stamp(uri))

    for old in sorted(gone):
        record = known[old]
        for uri in sorted(files):
            if new(uri) and uri not in moved.values() and connector.listed_size(uri) == record["size"] \
                    and hive_partitions(uri) == hive_partitions(old) and cache.sha256(uri) == record.get("sha256"):
                moved[old] = uri
                break
    if not moved:
        return known
    followed = {uri: {**was, "copy_of": moved[was["copy_of"]]} if was.get("copy_of") in moved else was
                for uri, was in known.items() if uri not in moved}
    followed.update((uri, known[old]) for old, uri in moved.items())
    return followed
