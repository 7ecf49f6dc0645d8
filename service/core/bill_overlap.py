"""One bill configured as two sources (session 48): two declared sources whose lines of one
provider's billing account (BillingAccountId: AWS's payer, Azure's billing account, Google's
billing account) and billing period hold the same cost. Every reader sums each source, so such
a bill is counted twice; nothing else tells it when the two sources read different files (the
AWS FOCUS and the CUR 2.0 export of one payer, an Azure billing-account export beside a
subscription export of it, two CUR 2.0 exports of one payer). service.ingest.shared tells the
same file read by two sources.

"The same cost" is a cost measure, billed or effective, that the lines of both sources hold
(ledger.AccountTotals: not None). An Azure bill's actual-cost export holds the billed cost and
its amortized export the effective cost alone, so that pair, one bill in two cost types, is no
overlap. Lines without a billing account id are left out: nothing says whose they are.

Read from the ledger's figures per billing account (service.core.commit.ledger_entry), never from
the lines: `status`, `attribute --check` and /api/v1/status pay nothing per line. An entry
committed before the ledger held them (accounts None) is not compared until the next `ingest` or
`spendlake rollup` reads its figures from its file (service.core.ledger_accounts). Two member
accounts' own CUR exports of one payer (the same payer, other lines) are told apart by the
sub-accounts their lines carry (SubAccountId: the member account, an Azure subscription): sources
whose lines of the account carry sub-accounts none of the other's do hold other lines, no overlap.
Where either's carry none, only the account is compared: such a pair is told, the sentence says
it may be one, and it stays a warning. Sources are told in groups each two of which may share
lines (`_sharing`): two members' exports beside a third export of the account whose lines carry
no sub-account are two overlaps, each member with the third, never one bill of all three."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from decimal import Decimal

from service.core.lake import Lake
from service.core.ledger import LedgerEntry
from service.core.units import money_text

COSTS = ("billed", "effective")
HINT = ("one bill configured as two sources is summed twice: keep one of them (remove the other from the config, "
        "then `spendlake forget` it); if each exports other member accounts of the payer, the lines differ and "
        "nothing is counted twice")


@dataclass(frozen=True)
class Overlap:
    """Sources holding one cost of one billing account's period: per cost, (source, its sum) in source order."""

    provider: str | None
    account: str
    period: str
    currency: str | None
    held: tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...]  # (cost, ((source, sum), ...)), costs in COSTS order

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(sorted({source for _, sums in self.held for source, _ in sums}))

    @staticmethod
    def twice(sums: Iterable[tuple[str, Decimal]]) -> Decimal:
        """What is counted more than once: all but the largest of the sources' sums (the smaller of two)."""
        values = sorted(value for _, value in sums)
        return sum(values[:-1], Decimal(0))

    def sentence(self) -> str:
        costs = "; ".join(
            f"{cost} cost " + ", ".join(f"{money_text(value, self.currency)} in {source}" for source, value in sums)
            + f" (up to {money_text(self.twice(sums), self.currency)} counted twice)" for cost, sums in self.held)
        provider = f"{self.provider} " if self.provider else ""
        *others, last = self.sources
        return (f"sources {', '.join(others)} and {last} hold the same cost of {provider}billing account "
                f"{self.account} for billing period {self.period}: {costs}; {HINT}")


def overlaps(entries: Iterable[LedgerEntry]) -> list[Overlap]:
    """The billing accounts' periods two or more of `entries`' sources hold the same cost of, in
    (period, provider, account, currency) order."""
    held: dict[tuple, dict[str, dict[str, Decimal]]] = defaultdict(lambda: defaultdict(dict))
    subs: dict[tuple, dict[str, tuple[str, ...] | None]] = defaultdict(dict)
    for entry in entries:
        for totals in entry.accounts or ():
            if totals.account is None:
                continue
            key = (entry.billing_period, totals.provider or "", totals.account, totals.currency or "")
            subs[key][entry.source] = totals.sub_accounts
            for cost in COSTS:
                if (value := getattr(totals, f"{cost}_cost")) is not None:
                    held[key][cost][entry.source] = value
    found = []
    for (period, provider, account, currency), costs in sorted(held.items()):
        groups: dict[tuple[str, ...], list] = {}  # a group of sources → (cost, ((source, sum), ...)) in COSTS order
        for cost in COSTS:
            sums = costs.get(cost, {})
            for group in _sharing(sums, subs[(period, provider, account, currency)]):
                groups.setdefault(group, []).append((cost, tuple((source, sums[source]) for source in group)))
        found += [Overlap(provider or None, account, period, currency or None, tuple(shared))
                  for _, shared in sorted(groups.items())]
    return found


def _sharing(sums: dict[str, Decimal], subs: dict[str, tuple[str, ...] | None]) -> list[tuple[str, ...]]:
    """The largest groups of `sums`' sources each two of which may hold one another's lines (the
    maximal cliques, Bron-Kerbosch: a few sources per account), each sorted, two sources or more:
    two may when both carry sub-accounts and share one, or either carries none (or has them
    unread), then the billing account alone is compared."""
    def may_share(one: tuple[str, ...] | None, other: tuple[str, ...] | None) -> bool:
        return not one or not other or bool(set(one) & set(other))

    near = {source: {other for other in sums if other != source and may_share(subs[source], subs[other])}
            for source in sums}
    groups: list[tuple[str, ...]] = []

    def grow(group: set[str], candidates: set[str], passed: set[str]) -> None:
        if not candidates and not passed and len(group) > 1:
            groups.append(tuple(sorted(group)))
        for source in sorted(candidates):
            grow(group | {source}, candidates & near[source], passed & near[source])
            candidates, passed = candidates - {source}, passed | {source}

    grow(set(), set(sums), set())
    return groups


def account_periods(found: Iterable[Overlap]) -> int:
    """The billing accounts' periods `found` overlaps are of: one however many groups of sources hold it."""
    return len({(o.period, o.provider, o.account, o.currency) for o in found})


def lake_overlaps(lake: Lake, sources: Collection[str] | None = None) -> list[Overlap]:
    """The overlaps of the lake's declared sources (those `lake.counts`), each with one of `sources`
    among its own when given (an ingest's: what it ran)."""
    found = overlaps(entry for entry in lake.ledger() if lake.counts(entry.source))
    return [o for o in found if sources is None or set(o.sources) & set(sources)]


def told(lake: Lake, sources: Collection[str] | None = None) -> list[str]:
    """One warning sentence per overlap (lake_overlaps)."""
    return [overlap.sentence() for overlap in lake_overlaps(lake, sources)]
