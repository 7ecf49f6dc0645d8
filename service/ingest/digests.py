"""The SHA-256 of a source's loose files, read once per version of each (an S3 object is
downloaded for it), for service.ingest.copies.

A file's digest is remembered with its stamp (the version and size its listing gives) in
`_state/file_digests.json` (service.ingest.periods keeps it): while the file at that path keeps
that stamp its digest is taken from there, not read again, whichever check asked for it. A
file of no version (a connector that knows none) is read each time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from connectors.base import CostConnector


class Digests:
    """`known`: the records remembered last time (uri → {"version", "size", "sha256", …});
    `read`: a file's SHA-256, read."""

    def __init__(self, connector: CostConnector, known: dict[str, dict], read: Callable[[str], str]):
        self.connector, self.known, self.read = connector, known, read
        self.taken: dict[str, dict] = {}  # every file whose digest this run asked for → its record

    def stamp(self, uri: str) -> dict:
        return {"version": self.connector.listed_version(uri) or "", "size": self.connector.listed_size(uri)}

    def unchanged(self, uri: str, stamp: dict) -> bool:
        was = self.known.get(uri)
        return bool(stamp["version"] and was and was.items() >= stamp.items())

    def record(self, uri: str) -> dict:
        """{"version", "size", "sha256"} of a listed file: remembered if its stamp is unchanged, else read."""
        if uri not in self.taken:
            stamp = self.stamp(uri)
            self.taken[uri] = {**stamp, "sha256": self.known[uri]["sha256"] if self.unchanged(uri, stamp)
                               else self.read(uri)}
        return dict(self.taken[uri])

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
