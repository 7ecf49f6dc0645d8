"""Files a billing source's listing gave whose type its kind does not read (`x.txt`, `x.xlsx`,
a `.json` in a FOCUS folder, `x.csv.zip`): ingest tells them as skipped, one line per folder,
so a bill saved in another format is not missing without a word. What exports write beside
their data is not told: manifests, Hadoop/Spark markers (`_SUCCESS`, `_committed_…`, `.crc`),
hidden files, checksums (`SHA256SUMS`, `x.md5`), AWS's Redshift/Athena helpers
(`…-RedshiftCommands.sql`, `crawler-cfn.yml`) and a FOCUS dataset's metadata (`<period>/metadata.json`,
`metadata/…/*.json`, as `spendlake export` writes them).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from connectors.storage import StoredObject, suffix_of

QUIET = re.compile(r"^[._]|manifest\.json$|\.(crc|sql|ya?ml|md5|sha\d*)$|^(md5|sha\d*)sums$", re.IGNORECASE)
FOCUS_METADATA = re.compile(r"(^|/)metadata(/.+)?\.json$", re.IGNORECASE)  # matched on the key


def unread_files(objects: Iterable[StoredObject], reads: tuple[str, ...], kind: str) -> list[tuple[str, str]]:
    """(the file, or its folder when it holds several, why it is not read and what to do) for
    each folder holding files of a type `kind` does not read (`reads`: the suffixes it reads)."""
    by_folder: dict[str, list[StoredObject]] = defaultdict(list)
    for obj in objects:
        if suffix_of(obj.name) not in reads and not QUIET.search(obj.name) and not FOCUS_METADATA.search(obj.key):
            by_folder[obj.uri.rsplit("/", 1)[0]].append(obj)
    told = []
    for folder, objs in sorted(by_folder.items()):
        types = ", ".join(sorted({suffix_of(o.name) or "extensionless" for o in objs}))
        why = (f"{kind} reads {', '.join(reads)} files, not {types}: export the bill as one of those, or move what "
               "is not a bill out of the location")
        told.append((objs[0].uri, f"not read: {why}") if len(objs) == 1
                    else (folder, f"{len(objs)} files not read: {why}"))
    return told
