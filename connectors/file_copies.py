"""What the copy checks share (oci-cost's, service.ingest.copies', service.ingest.row_copies'): the
order that tells which of files alike is the original, and the line a copy is told in."""

from __future__ import annotations

SAME = "the same {same} as {original} (a copy: its rows are read once)"


def written_first(uri: str, modified: float | None, exporters_name: bool = True) -> tuple:
    """The order in which the original of files alike comes first, once what a check knows better
    (a file a manifest lists, one a ledger entry holds) is equal: the earliest written (a copy is
    made after it); of files written at once (`cp -a` and `gzip -dk` keep the times), the one of
    the shortest path in folders (copies go in a folder more: `backup/2024-05`), then one under
    the name the exporter writes (`exporters_name`), then the shortest (`… (1).csv`,
    `2024-05-restored`), then the first by path."""
    return modified or 0.0, uri.count("/"), not exporters_name, len(uri), uri
