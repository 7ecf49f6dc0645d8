"""The sums an answer read from a period's lines against its ledger entry's: the evidence of a
partition altered in place with its size, footer and modification time kept (bit rot, an edit
then `touch -r`), which the quick check of every read cannot see (service/core/integrity.py).
An answer that sums the lines anyway (`attribute --check`, the report's invoices) compares
them with the ledger at no cost; on a difference it hashes the partition as `verify` does, and
an altered one is an error naming the file, recorded as `verify` records it so the next ingest
reads the period again (its delivery unchanged, it would be skipped)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal

from service.core.errors import NOT_WRITABLE
from service.core.integrity import PartitionCheck, deep_check, partition_error
from service.core.state_files import problems_kept

# a cost column an answer sums → the ledger's total of it per currency
LEDGER_TOTAL = {"BilledCost": "billed_cost", "EffectiveCost": "effective_cost"}

SumKey = tuple[str, str, str | None]  # (source, billing period, currency)


def differing(checks: Iterable[PartitionCheck], sums: Mapping[SumKey, Decimal], column: str) -> list[PartitionCheck]:
    """The partitions whose lines' sums of `column` (`sums`, per source, period and currency;
    a period absent from `sums` is not judged) are not their ledger entry's."""
    judged = {(source, period) for source, period, _ in sums}
    out = []
    for check in checks:
        if check.entry is None or (check.source, check.period) not in judged:
            continue
        ledger = {t.currency: getattr(t, LEDGER_TOTAL[column]) or Decimal(0) for t in check.entry.totals}
        lines = {currency: total or Decimal(0) for (source, period, currency), total in sums.items()
                 if (source, period) == (check.source, check.period)}
        if {c: v for c, v in ledger.items() if v} != {c: v for c, v in lines.items() if v}:
            out.append(check)
    return out


def raise_if_altered(lake, checks: Sequence[PartitionCheck], sums: Mapping[SumKey, Decimal], column: str) -> None:
    """A DataError naming the partitions among `checks` whose lines' `sums` of `column` differ
    from their ledger entry's and whose file does not match the entry (hashed, re-summed: a
    difference alone may be the answer's, not the file's); nothing when none is altered."""
    suspects = differing(checks, sums, column)
    if not suspects:
        return
    with lake.connect() as con:
        bad = [found for found in (deep_check(con, c.path, c.entry) for c in suspects) if not found.ok]
    if bad:
        _record(lake, bad)
        raise partition_error(bad)


def _record(lake, bad: Sequence[PartitionCheck]) -> None:
    """`bad` among the last verify's problems (its time and the rest kept), where the ledger
    still holds the entries they were checked against (an ingest may have replaced them)."""
    held = lake.ledger()
    found = [{"source": c.source, "billing_period": c.period, "state": c.state, "detail": c.detail}
             for c in bad if c.entry in held]
    if not found:
        return
    verify = lake.read_state("verify")
    problems = problems_kept(verify, found, {(p["source"], p["billing_period"]) for p in found},
                             lambda p: (p["source"], p["billing_period"]))
    try:
        lake.write_state("verify", {**verify, "problems": problems})
    except OSError as exc:  # a read-only lake still gets the error; `verify` as the owner records it
        if exc.errno not in NOT_WRITABLE:
            raise
