"""Which of a source's loose files are copies of another of its files, read once.

A file holding the same bytes as another of the source (SHA-256; a period's folder copied
beside the original, `cp -r 2024-05 2024-05-restored`, or an export restored under a new name)
is the same delivery: read once, the copy skipped with one line naming both, so no period sums
it twice; under other Hive folder values (`SubAccountId=a`, `=b`) the same bytes are other rows.
The original is a file a manifest delivery lists, else one a ledger entry holds, else one never
found a copy, else the earliest written (a copy is written after it), else, written at once
(`cp -a` keeps the times), the one of the shortest path: copies are put in a folder more or
under a longer name (`2024-05-restored`, `backup/2024-05`), and sort before it by path. Only files of equal size are read for a digest (an S3
object is downloaded for it), remembered with the file's version (service.ingest.periods keeps
them in `_state/file_digests.json`): an unchanged file is read for it once. A bare file holding
the bytes of a file a manifest lists is a copy of it too.

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
from connectors.exportfile import hive_partitions

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
    files = {file.files[0]: file for file in loose}
    known = _followed(connector, files, known, digest)
    # a stale copy whose corrected original is gone holds the only rows left, an older version
    older = {uri: OLDER.format(copy=uri, original=was["copy_of"]) for uri, was in known.items() if uri in files
             and was.get("copy_of") and not was.get("of_manifest") and connector.listed_size(was["copy_of"]) is None
             and connector.listed_size(uri) == was["size"]
             and (known.get(was["copy_of"]) or was)["sha256"] != was["sha256"]}
    by_size: dict[int, list[str]] = defaultdict(list)
    for uri in dict.fromkeys([*listed, *files]):
        size = connector.listed_size(uri)
        if size is not None:
            by_size[size].append(uri)
    alike = [uri for uris in by_size.values() if len(uris) > 1 and any(u in files for u in uris) for uri in uris]
    # found a copy before, of the same size still, its original still there or a manifest's part
    # (its period is the manifest's): read for its digest only if its version changed (a `cp -a`
    # made afresh), to tell whether it is the same copy
    def still_a_copy(was: dict) -> bool:
        return bool(was.get("of_manifest") or connector.listed_size(was["copy_of"]) is not None)

    were = {uri: known[uri] for uri in files if (known.get(uri) or {}).get("copy_of")
            and connector.listed_size(uri) == known[uri]["size"] and still_a_copy(known[uri])}
    # a copy moved (`mv 2024-05-restored 2024-05-old`): a new file of a gone copy's size, read to
    # tell whether it holds that copy's bytes
    gone = {uri: was for uri, was in known.items() if was.get("copy_of") and uri not in files and still_a_copy(was)}
    moved = [uri for uri in files if uri not in known
             and any(connector.listed_size(uri) == was["size"] for was in gone.values())]
    # a copy's loose original read too, so its digest is remembered should it be renamed (_followed)
    # and tells whether it changed: a copy changed while its original did not is no correction
    recorded = {uri: known[uri] for uri in files if (known.get(uri) or {}).get("copy_of") in files
                and known[uri]["copy_of"] in known and not known[uri].get("of_manifest")}
    of_loose = [was["copy_of"] for was in [*were.values(), *recorded.values()] if was["copy_of"] in files]
    digests: dict[str, dict] = {}
    for uri in dict.fromkeys([*alike, *were, *moved, *of_loose]):
        stamp = {"version": connector.listed_version(uri) or "", "size": connector.listed_size(uri)}
        was = known.get(uri)
        digests[uri] = {**stamp, "sha256": was["sha256"] if stamp["version"] and was and was.items() >= stamp.items()
                        else digest(uri)}

    def content(uri: str) -> tuple:
        # a file's rows are its bytes and the Hive values its folders give the columns it lacks:
        # the same bytes under SubAccountId=a and SubAccountId=b are two accounts' lines
        return digests[uri]["sha256"], tuple(sorted((key.lower(), value) for key, value in hive_partitions(uri)))

    for uri in moved:
        was = next((was for old, was in gone.items() if was["sha256"] == digests[uri]["sha256"]
                    and hive_partitions(old) == hive_partitions(uri)), None)
        if was is not None:
            were[uri] = was
    unchanged = {uri: was["copy_of"] for uri, was in were.items() if digests[uri]["sha256"] == was["sha256"]}
    stale = {uri for uri, original in unchanged.items() if original not in digests or content(original) != content(uri)}
    by_manifest = set(listed)
    kept: dict[tuple, str] = {}  # a stale copy first: a copy of it is a stale copy of its original
    for uri in sorted(dict.fromkeys([*alike, *unchanged]), key=lambda u: (
            u not in stale, u not in by_manifest, u not in held, u in were or bool((known.get(u) or {}).get("copy_of")),
            connector.listed_modified(u) or 0.0, u.count("/"), len(u), u)):
        kept.setdefault(content(uri), uri)
    originals = dict(unchanged)
    for uri in (u for u in alike if u in files and u not in unchanged):
        original = unchanged.get(kept[content(uri)], kept[content(uri)])  # a copy's copy: of its original
        if original != uri:
            originals[uri] = original

    def same(uri: str, was: dict) -> bool:
        return connector.listed_size(uri) == was["size"] and digests[uri]["sha256"] == was["sha256"]

    # the exporter rewrote the original with the same bytes after the backup was made: the backup,
    # older, was taken for the original, and the real original's correction would count beside it
    rewritten = {uri: was["copy_of"] for uri, was in recorded.items() if not same(uri, was)
                 and same(was["copy_of"], known[was["copy_of"]])
                 and not (uri in digests and content(uri) == content(was["copy_of"]))}  # copied again: a copy
    result = Copies([file for file in loose if file.files[0] not in originals and file.files[0] not in rewritten],
                    rewritten=rewritten, older=older)
    for uri, original in sorted(originals.items()):
        digests[uri]["copy_of"] = original
        if original in by_manifest or (known.get(uri) or {}).get("of_manifest"):
            digests[uri]["of_manifest"] = True
        if original in digests and content(original) == content(uri):
            result.skipped.append(OtherDataset(uri, f"the same bytes as {original} (a copy: its rows are read once)",
                                               original))
        else:
            why = STALE if connector.listed_size(original) is not None else GONE
            result.skipped.append(OtherDataset(uri, why.format(original=original), original, stale=True))
    # a file of no version is read each time, unless it is a copy: its copy_of is kept
    result.digests = {uri: d for uri, d in digests.items() if d["version"] or "copy_of" in d}
    result.digests.update((uri, known[uri]) for uri in rewritten)  # so until one of the two is gone
    # so the corrected original put back (there or renamed) leaves the copy stale again
    result.digests.update((key, known[key]) for uri in older for key in (uri, known[uri]["copy_of"]) if key in known)
    return result


def _followed(connector: CostConnector, files: dict, known: dict[str, dict],
              digest: Callable[[str], str]) -> dict[str, dict]:
    """`known` with a copy's original renamed or moved under the location (`mv 2024-05
    2024-05-final`, part-0 to part-1) followed: a new file holding the bytes remembered for an
    original gone from the listing, under the same Hive values, is that original, so a stale copy
    of it stays stale rather than counting beside it."""
    gone = {was["copy_of"] for was in known.values() if was.get("copy_of") and not was.get("of_manifest")
            and connector.listed_size(was["copy_of"]) is None and was["copy_of"] in known}
    moved: dict[str, str] = {}
    for old in sorted(gone):
        record = known[old]
        for uri in sorted(files):
            if uri not in known and uri not in moved.values() and connector.listed_size(uri) == record["size"] \
                    and hive_partitions(uri) == hive_partitions(old) and digest(uri) == record["sha256"]:
                moved[old] = uri
                break
    if not moved:
        return known
    followed = {uri: {**was, "copy_of": moved[was["copy_of"]]} if was.get("copy_of") in moved else was
                for uri, was in known.items() if uri not in moved}
    followed.update((uri, known[old]) for old, uri in moved.items())
    return followed
