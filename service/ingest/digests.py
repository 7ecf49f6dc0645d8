"""The content digests of a source's loose files (connectors.content), read once per version of
each (an S3 object is downloaded for it; its head is a ranged read), for service.ingest.copies.

A file's digest is remembered with its stamp (the version and size its listing gives) in
`_state/file_digests.json` (service.ingest.periods keeps it): while the file at that path keeps
that stamp its digest is taken from there, not read again, whichever check asked for it. A
file of no version (a connector that knows none) is read each time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from connectors.base import CostConnector
from connectors.file_facts import hive_partitions


class Digests:
    """`known`: the records remembered last time (uri → {"version", "size", "sha256", "head", …});
    `read`: a file's content digest (connectors.content), read whole; `peek`: its head and CSV header."""

    def __init__(self, connector: CostConnector, known: dict[str, dict], read: Callable[[str], str],
                 peek: Callable[[str], tuple[str, list[str]]]):
        self.connector, self.known, self.read, self.peek = connector, known, read, peek
        self.taken: dict[str, dict] = {}  # every file whose digest or head this run asked for → its record

    def stamp(self, uri: str) -> dict:
        return {"version": self.connector.listed_version(uri) or "", "size": self.connector.listed_size(uri)}

    def unchanged(self, uri: str, stamp: dict) -> bool:
        was = self.known.get(uri)
        return bool(stamp["version"] and was and was.items() >= stamp.items())

    def _entry(self, uri: str) -> dict:
        if uri not in self.taken:
            stamp, was = self.stamp(uri), self.known.get(uri) or {}
            # a record made before `head` holds the SHA-256 of the bytes, not of the content: read again
            same = self.unchanged(uri, stamp) and "head" in was
            self.taken[uri] = {**stamp, **{k: was[k] for k in FIELDS if same and k in was}}
        return self.taken[uri]

    def record(self, uri: str) -> dict:
        """{"version", "size", "sha256", …} of a listed file: remembered if its stamp is unchanged, else read."""
        entry = self._entry(uri)
        if "sha256" not in entry:
            entry["sha256"] = self.read(uri)
            self._migrated(uri, entry["sha256"])
        return dict(entry)

    def head(self, uri: str) -> tuple[str, list[str]]:
        """A file's head digest and the Hive keys it holds as columns, remembered as `record` is."""
        entry = self._entry(uri)
        if "head" not in entry:
            entry["head"], columns = self.peek(uri)
            keys = {key.lower() for key, _ in hive_partitions(uri)}
            entry["own"] = sorted(keys & set(columns))
        return entry["head"], entry["own"]

    def _migrated(self, uri: str, sha256: str) -> None:
        """A file unchanged since a record of its bytes' SHA-256 (made before `head`): the records of
        those bytes (a copy's, its original's) now hold its content's digest."""
        was = self.known.get(uri) or {}
        if "head" in was or not self.unchanged(uri, self.stamp(uri)) or was.get("sha256") == sha256:
            return
        for record in self.known.values():
            if record.get("sha256") == was.get("sha256") and "head" not in record:
                record["sha256"] = sha256

    def sha256(self, uri: str) -> str:
        return self.record(uri)["sha256"]

    def kept(self, listed: Iterable[str]) -> dict[str, dict]:
        """The records to remember: each this run asked for, and each of a file still `listed` with
        the stamp it had (a check that asked for it last run may not ask this run: a file found then
        not to be a renamed original is not looked at again), of a version. A copy's record is the
        copy check's to keep (service.ingest.copies)."""
        kept = {uri: {**was} for uri in listed if uri not in self.taken and (was := self.known.get(uri))
                and "copy_of" not in was and self.unchanged(uri, self.stamp(uri))}
        kept.update((uri, dict(record)) for uri, record in self.taken.items() if record["version"])
        return kept


FIELDS = ("sha256", "head", "own")  # what a record remembers of a file's content
