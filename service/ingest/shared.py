"""The files a source's ledger holds that another source's holds too (break47: two sources whose
folders hold the same export summed it twice, silently). Each source reads its location whole, so
such a file is counted by both: each ingest warns, naming both sources and files, and `status`
says it (the source's `shared` record) until one of them goes.

A file is another source's when it is the same file (the same real path, or S3 key) or, the same
size as one of that source's, holds the same content (connectors.content: the digest the copy
check remembered, else a local file read). A copy in other bytes across sources (gzipped beside a
plain one) is not looked for: its size differs."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Collection, Sequence
from pathlib import Path

from connectors import content
from service.core.errors import DataError
from service.core.lake import Lake

HINT = "give each file one source (move it out of one location, or remove one of the sources)"
DIGESTS = "file_digests"  # service.ingest.periods.DIGESTS: the copy check's records


def told(lake: Lake, sources: Sequence[str], declared: Collection[str]) -> list[str]:
    """The warnings of `sources`' files another `declared` source holds too, each remembered for
    `status` (a source the config no longer declares counts nowhere: a renamed one's files are not
    another's)."""
    files: dict[str, set[str]] = defaultdict(set)
    for entry in lake.ledger():
        if entry.source in declared:
            files[entry.source].update(entry.files)
    try:
        known = {uri: r for records in lake.read_state(DIGESTS).values() for uri, r in records.items()}
    except DataError:  # only a cache (service.ingest.periods.read_cache): the files are read
        known = {}
    warnings = []
    for source in sources:
        found = shared(source, files, known)
        _remember(lake, source, found)
        warnings += [f"{uri}: also read by source {other} ({peer}{'' if same else ', the same content'}): its rows "
                     f"are counted by both sources; {HINT}" for uri, (other, peer, same) in sorted(found.items())]
    return warnings


def shared(source: str, files: dict[str, set[str]], known: dict[str, dict]) -> dict[str, tuple[str, str, bool]]:
    """Each file of `source` another source holds → (that source, its file, whether the same path).
    `files`: each source's files; `known`: the copy check's records (uri → {"sha256", "head", …})."""
    peers = {uri: other for other, uris in files.items() if other != source for uri in uris}
    if not peers or not files.get(source):
        return {}
    real = {_real(uri): uri for uri in peers}
    by_size: dict[int, list[str]] = defaultdict(list)
    for uri in peers:
        if (size := _size(uri)) is not None:
            by_size[size].append(uri)
    found: dict[str, tuple[str, str, bool]] = {}
    for uri in sorted(files[source]):
        if (peer := real.get(_real(uri))) is not None:
            found[uri] = (peers[peer], peer, True)
        elif alike := by_size.get(_size(uri), []):
            mine = _digest(uri, known)
            peer = next((p for p in alike if mine is not None and _digest(p, known) == mine), None)
            if peer is not None:
                found[uri] = (peers[peer], peer, False)
    return found


def _real(uri: str) -> str:
    return uri if uri.startswith("s3://") else os.path.realpath(uri)


def _size(uri: str) -> int | None:
    try:
        return None if uri.startswith("s3://") else os.stat(uri).st_size
    except OSError:
        return None


def _digest(uri: str, known: dict[str, dict]) -> str | None:
    record = known.get(uri) or {}
    if record.get("head") and record.get("sha256"):
        return record["sha256"]
    try:
        return content.digest(Path(uri), uri)
    except OSError:
        return None


def _remember(lake: Lake, source: str, found: dict[str, tuple[str, str, bool]]) -> None:
    """The source's shared files in its `sources` state record, which `status` tells."""
    told = {uri: f"{peer} (source {other})" for uri, (other, peer, _) in sorted(found.items())}
    state = lake.read_state("sources")
    record = state.get(source) or {"failures_total": 0}
    if told != (record.get("shared") or {}):
        if told:
            state.setdefault(source, record)["shared"] = told
        else:
            record.pop("shared", None)
        lake.write_state("sources", state)
