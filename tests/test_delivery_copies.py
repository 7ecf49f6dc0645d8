"""A re-copied export is the same delivery, never committed twice (issue 13: no committed dollar
doubled). Loose files are joined by period wherever they sit, so a period's folder copied beside
the original (`cp -r 2024-05 2024-05-restored`) joined both and doubled the bill; a file holding
the same bytes as another of its source is now read once and the copy said skipped. A corrected
file still supersedes what the lake holds."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import boto3
import duckdb
import pytest
from aws_exports import cur2_table, line, local_put, to_bytes, write_cur2, write_legacy
from billing_helpers import failures
from layout_exports import FORMATS, WRITERS, duckdb_sums, lake_sums
from moto import mock_aws

from service.ingest.periods import DIGESTS as STATE
from tests.test_delivery_layout import committed, lines, run, statuses

KINDS = sorted(WRITERS)


def export_of(tmp_path: Path, kind: str, cost: str = "1.10") -> Path:
    """A May file and a June file in a folder of their own each."""
    export, write = tmp_path / "export", WRITERS[kind]
    for period, fmt in (("2024-05", FORMATS[kind][0]), ("2024-06", FORMATS[kind][1])):
        (export / period).mkdir(parents=True, exist_ok=True)
        write(export / period / ("part-0" + fmt), [(period, "USD", cost), (period, "EUR", "0.000000000001")])
    return export


def copied_lines(result) -> list[str]:
    return [line for line in lines(result) if "skipped, the same bytes as" in line]


@pytest.mark.parametrize("kind", KINDS)
def test_a_periods_folder_copied_beside_the_original_is_not_committed_again(tmp_path, kind):
    export = export_of(tmp_path, kind)
    lake, result = run(tmp_path, kind, export)
    before = lake_sums(lake)
    assert failures(result) == [] and before == duckdb_sums(kind, export)

    shutil.copytree(export / "2024-05", export / "2024-05-restored")
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and committed(result) == [], lines(result)
    assert lake_sums(lake) == before  # was twice May's
    restored = next((export / "2024-05-restored").iterdir())
    assert copied_lines(result) == [
        f"src {restored}: skipped, the same bytes as {export / '2024-05' / restored.name} "
        "(a copy: its rows are read once)"]
    assert statuses(run(tmp_path, kind, export)[1]) == {"unchanged", "skipped"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_copy_there_at_the_first_ingest_counts_once_and_a_corrected_file_still_supersedes(tmp_path, kind):
    export = export_of(tmp_path, kind)
    once = duckdb_sums(kind, export)
    shutil.copytree(export, tmp_path / "moved" / "export")  # the whole export copied under the location too
    shutil.move(tmp_path / "moved", export / "moved")
    lake, result = run(tmp_path, kind, export)
    assert failures(result) == [] and committed(result) == ["2024-05", "2024-06"], lines(result)
    assert lake_sums(lake) == once and len(copied_lines(result)) == 2

    for folder in (export, export / "moved" / "export"):  # a correction, copied again
        WRITERS[kind](folder / "2024-05" / ("part-0" + FORMATS[kind][0]), [("2024-05", "USD", "1.20")])
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and committed(result) == ["2024-05"], lines(result)
    assert lake_sums(lake) == {("2024-05", "USD"): Decimal("1.20"), **{k: v for k, v in once.items() if k[0] != "2024-05"}}

def read_whole(lake) -> list[int]:
    """How many files of each source the copy check read whole for their content's digest."""
    return [sum("sha256" in record for record in records.values()) for records in lake.read_state(STATE).values()]


def test_only_files_of_one_head_are_read_whole_for_their_digest_and_forget_drops_the_digests(tmp_path):
    export = export_of(tmp_path, "focus")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and read_whole(lake) == [0]  # their first text differs: none read whole
    shutil.copytree(export / "2024-06", export / "june-again")
    assert failures(run(tmp_path, "focus", export)[1]) == []
    assert read_whole(lake) == [2]  # the June file and its copy
    lake.state_file(STATE).write_text("{not json")  # only a cache: read as empty, written anew
    result = run(tmp_path, "focus", export)[1]
    assert failures(result) == [] and statuses(result) == {"unchanged", "skipped"}
    assert read_whole(lake) == [2]
    lake.forget("src")
    assert lake.read_state(STATE) == {}


def test_a_single_file_is_not_read_for_copies(tmp_path):
    export = export_of(tmp_path, "focus")
    shutil.rmtree(export / "2024-06")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and lake.read_state(STATE) == {}


@pytest.mark.slow
def test_an_s3_copy_under_another_prefix_is_read_once(tmp_path):
    export = export_of(tmp_path, "focus")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="exports")
        for path in export.rglob("*.*"):
            key = path.relative_to(export).as_posix()
            s3.upload_file(str(path), "exports", "focus/" + key)
            s3.upload_file(str(path), "exports", "focus/restored/" + key)
        lake, result = run(tmp_path, "focus", "s3://exports/focus")
    assert failures(result) == [] and lake_sums(lake) == duckdb_sums("focus", export)
    assert len(copied_lines(result)) == 2 and all("s3://exports/focus/restored/" in line
                                                   for line in copied_lines(result))


def test_a_legacy_cur_period_folder_copied_under_another_name_is_no_second_delivery(tmp_path):
    """`cp -r 20240501-20240601 20240501-20240601-restored`: no manifest is looked for under the
    new name, so its part was a bare CSV of May beside the manifest's delivery of May; each run
    committed one over the other (the lake flipped between them, a stale copy's rows every
    other run). A bare file with the bytes of a file a manifest lists is a copy of it."""
    write_legacy(local_put(tmp_path / "cur"), prefix="", report="rep", period="2024-05", assembly="asm-1",
                 parts=[[line("2024-05", cost="1.10")]])
    lake, result = run(tmp_path, "aws-cur", tmp_path / "cur" / "rep")
    assert failures(result) == [] and committed(result) == ["2024-05"]
    [entry] = lake.ledger()
    period = tmp_path / "cur" / "rep" / "20240501-20240601"
    shutil.copytree(period, period.with_name(period.name + "-restored"))
    for _ in range(2):
        result = run(tmp_path, "aws-cur", tmp_path / "cur" / "rep")[1]
        assert failures(result) == [] and committed(result) == [], lines(result)
        assert lake.ledger() == [entry] and copied_lines(result) == [
            f"src {period}-restored/asm-1/rep-1.csv.gz: skipped, the same bytes as {period}/asm-1/rep-1.csv.gz "
            "(a copy: its rows are read once)"]


def _cur2(root: Path, delivery_folder: str | None, execution: str = "2024-06-01T01:02:03.000Z-abc") -> None:
    con = duckdb.connect()
    cost = "1.10" if execution.endswith("abc") else "1.20"  # another execution: May restated
    body = to_bytes(con, cur2_table(con, [line("2024-05", cost=cost)]), root.parent, "parquet")
    write_cur2(local_put(root), prefix="", export="exp", period="2024-05", execution=execution,
               parts=[body], fmt="parquet", delivery_folder=delivery_folder)


def _legacy(root: Path) -> None:
    write_legacy(local_put(root), prefix="", report="exp", period="2024-05", assembly="asm-1",
                 parts=[[line("2024-05", cost="1.10")]])


@pytest.mark.parametrize(("kind", "write"), [
    ("aws-cur2", lambda root: _cur2(root, None)),  # OVERWRITE_REPORT
    ("aws-cur2", lambda root: _cur2(root, "2024-06-01T01:02:03.000Z-abc")),  # CREATE_NEW_REPORT
    ("aws-cur", _legacy)], ids=["cur2-overwrite", "cur2-create-new", "cur-legacy"])
def test_an_export_with_manifests_copied_beside_the_original_is_the_same_delivery(tmp_path, kind, write):
    """`cp -r exp exp-restored` under the location: two folders delivering May failed the period
    as two exports (exit 3; a legacy CUR said it twice). The same manifest bytes with files of the
    same sizes are one delivery: the original read, the copy skipped; two exports still fail."""
    write(tmp_path / "loc")
    lake, result = run(tmp_path, kind, tmp_path / "loc")
    before = lake_sums(lake)
    assert failures(result) == [] and before == {("2024-05", "USD"): Decimal("1.10")}
    shutil.copytree(tmp_path / "loc" / "exp", tmp_path / "loc" / "exp-restored", copy_function=shutil.copy)  # cp -r
    result = run(tmp_path, kind, tmp_path / "loc")[1]
    assert failures(result) == [] and statuses(result) == {"unchanged", "skipped"}, lines(result)
    [skipped] = [line for line in lines(result) if "skipped" in line]
    assert skipped.startswith(f"src {tmp_path / 'loc' / 'exp-restored'}/") and "Manifest.json: skipped, the same " \
        f"2024-05 delivery as {tmp_path / 'loc' / 'exp'}/" in skipped and skipped.endswith("(a copy of the export: read once)")
    assert lake_sums(lake) == before
    [(copy, original)] = lake.read_state("sources")["src"]["copies"].items()  # what `status` tells
    assert copy.startswith(str(tmp_path / "loc" / "exp-restored")) and original == copy.replace("exp-restored", "exp")

    manifest = next(p for p in (tmp_path / "loc" / "exp-restored").rglob("*Manifest.json"))
    manifest.write_text(manifest.read_text().replace("asm-1", "asm-2").replace(":03.000Z-abc", ":04.000Z-abc")
                        .replace('"exp/', '"exp-restored/').replace("bucket/exp/", "bucket/exp-restored/"))
    result = run(tmp_path, kind, tmp_path / "loc")[1]  # another export's delivery of May beside: two exports
    assert [o.status for o in result.outcomes] == ["failed"], lines(result)
    assert "2 " in str(result.failed[0].error) and lake_sums(lake) == before


def test_an_azure_export_run_copied_is_its_run_read_once(tmp_path):
    """Azure runs are told by their manifest's runId: a run folder or the whole export copied
    beside is the same run, never a second delivery of its month (pinned: it was right)."""
    from tests.test_azure_cost import SEPT, ea_rows, write_run
    root, run_id = tmp_path / "loc", "f1e2d3c4-0000-4000-8000-000000000002"
    write_run(root, export="daily", date_range="20230901-20230930", run_id=run_id,
              submitted="2023-09-20T06:01:02.1234567Z", parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="1"))})
    lake, result = run(tmp_path, "azure-cost", root)
    assert failures(result) == [] and lake_sums(lake) == {("2023-09", "USD"): Decimal("1")}
    shutil.copytree(root / "daily" / "20230901-20230930" / run_id, root / "daily" / "20230901-20230930" / "restored")
    shutil.copytree(root / "daily", root / "daily-restored", copy_function=shutil.copy)
    result = run(tmp_path, "azure-cost", root)[1]
    assert [o.status for o in result.outcomes] == ["unchanged"], lines(result)
    assert lake_sums(lake) == {("2023-09", "USD"): Decimal("1")}


def test_status_says_which_copies_the_last_ingest_skipped_until_they_are_gone(tmp_path):
    import json

    import yaml
    from click.testing import CliRunner

    from service.cli.main import cli

    export = export_of(tmp_path, "focus")
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "src", "kind": "focus", "location": str(export)}]}))

    def said(*args: str) -> list[str]:
        result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), *args])
        assert result.exit_code == 0, result.output
        return [line for line in result.stderr.splitlines() if line.startswith("copies: ")]

    said("ingest")
    assert said("status", "--format", "table") == []
    shutil.copytree(export / "2024-05", export / "2024-05-restored")
    said("ingest")
    restored = next((export / "2024-05-restored").iterdir())
    assert said("status", "--format", "table") == [f"copies: source src: 1 copied file(s) under its location skipped by its last ingest "
                              f"(read once): {restored}, the same as {export / '2024-05' / restored.name}; move "
                              "copies out of the location to quiet this"]
    # status47: CSV and JSON said nothing of it; a row of their table now, the line's sentence as its note
    shown = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--format", "json"])
    assert [(r["source"], f"copies: {r['note']}") for r in json.loads(shown.stdout) if r["note_kind"] == "copies"] == [
        ("src", said("status", "--format", "table")[0])]
    shutil.rmtree(export / "2024-05-restored")
    said("ingest")
    assert said("status", "--format", "table") == []


def test_the_same_bytes_under_other_hive_values_are_other_rows_and_under_the_same_ones_a_copy(tmp_path):
    """A Hive export gives a file's lines the values of its folders for the columns it lacks, so two
    accounts' files with the same lines hold the same bytes and are two accounts' spend (the copy
    check dropped one: USD 1.10 of 2.20); a folder copied under another parent keeps its values
    and is still a copy."""
    export = tmp_path / "export"
    for account in ("a", "b"):
        (export / f"SubAccountId={account}").mkdir(parents=True)
        WRITERS["focus"](export / f"SubAccountId={account}" / "part-0.parquet", [("2024-05", "USD", "1.10")])
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and copied_lines(result) == [], lines(result)
    assert lake.query().execute("SELECT SubAccountId, sum(BilledCost)::VARCHAR FROM costs GROUP BY 1 ORDER BY 1"
                                ).fetchall() == [("a", "1.100000000000"), ("b", "1.100000000000")]

    shutil.copytree(export / "SubAccountId=a", export / "restored" / "SubAccountId=a")
    result = run(tmp_path, "focus", export)[1]
    assert failures(result) == [] and committed(result) == [], lines(result)
    assert len(copied_lines(result)) == 1 and "restored" in copied_lines(result)[0]


def may_file(folder: Path, kind: str) -> Path:
    return folder / "2024-05" / ("part-0" + FORMATS[kind][0])


@pytest.mark.parametrize("cost", ["1.20", "1.2345"], ids=["same-size", "other-size"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_copy_left_behind_when_its_original_is_corrected_stays_a_copy_and_is_said_stale(tmp_path, kind, cost):
    """`cp -r 2024-05 2024-05-restored`, then the provider re-exports May with other numbers into
    2024-05: the copy held the same bytes as nothing any more and was read as a second file of
    May beside the correction (May's USD 1.10 + 1.20 = 2.30). A file once found a copy stays one
    while its bytes are unchanged, and is said stale, naming both."""
    export = export_of(tmp_path, kind)
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)  # cp -r: written later
    lake, result = run(tmp_path, kind, export)
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10"), lines(result)

    WRITERS[kind](may_file(export, kind), [("2024-05", "USD", cost)])
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and committed(result) == ["2024-05"], lines(result)
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal(cost)  # was 1.10 + the correction
    stale = may_file(export, kind).parent.with_name("2024-05-restored") / may_file(export, kind).name
    assert [line for line in lines(result) if "skipped" in line] == [
        f"src {stale}: skipped, a stale copy of {may_file(export, kind)} (the same bytes when it was found, that "
        "file changed since: its rows are not read; delete the copy or copy the file again)"]
    result = run(tmp_path, kind, export)[1]  # and so on each run, reading nothing
    assert statuses(result) == {"unchanged", "skipped"} and len([x for x in lines(result) if "stale" in x]) == 1

    shutil.copy(may_file(export, kind), stale)  # copied again: a copy as before
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and copied_lines(result) == [
        f"src {stale}: skipped, the same bytes as {may_file(export, kind)} (a copy: its rows are read once)"]
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal(cost)


def rewritten(copy: Path, original: Path) -> str:
    return (f"src 2024-05: FAILED: {copy}: held the same bytes as {original} when found, a copy of it, and changed "
            f"since while {original} did not: one of the two is a copy or backup, and reading both would count their "
            "period twice; not committed — delete the copy or backup, or move it out of the location (a file of its "
            "own: give it a new name)")


@pytest.mark.parametrize("kind", KINDS)
def test_a_copy_that_is_itself_changed_fails_its_period_until_it_is_moved_or_renamed(tmp_path, kind):
    """The reverse: the copy rewritten with other numbers while the original stays. Summed beside
    the original (USD 1.10 + 0.40) it doubles the period when the 'copy' is in truth the exporter's
    file (see the next test); so May fails naming both (exit 3) and keeps what the lake holds, until
    the copy goes, or is renamed: a file of its own, it counts beside the original."""
    export = export_of(tmp_path, kind)
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)
    lake, result = run(tmp_path, kind, export)
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10")
    copy = export / "2024-05-restored" / may_file(export, kind).name
    WRITERS[kind](copy, [("2024-05", "USD", "0.40")])
    for _ in range(2):
        result = run(tmp_path, kind, export)[1]
        assert [line for line in lines(result) if "FAILED" in line] == [rewritten(copy, may_file(export, kind))]
        assert lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10")
    copy.rename(copy.with_name("part-7" + FORMATS[kind][0]))
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and committed(result) == ["2024-05"] and copied_lines(result) == [], lines(result)
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal("1.50")


def test_a_backup_older_than_the_original_it_copies_is_never_summed_beside_the_originals_correction(tmp_path):
    """The backup made, then the exporter rewrote May with the same bytes: the backup, written
    first, was taken for the original and 2024-05/part-0 for its copy, so May's correction there
    was a copy changed, a file of its own, counted beside the backup (USD 1.10 + 1.20 = 2.30).
    May fails naming both, keeping 1.10; the backup deleted, May is the correction alone."""
    import os
    import time
    export = export_of(tmp_path, "focus")
    backup = export / "2024-05-backup" / "part-0.csv"
    shutil.copytree(export / "2024-05", backup.parent, copy_function=shutil.copy)
    may = may_file(export, "focus")
    may.write_bytes(may.read_bytes())
    later = time.time() + 3600
    os.utime(may, (later, later))
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10"), lines(result)
    WRITERS["focus"](may, [("2024-05", "USD", "1.20")])
    result = run(tmp_path, "focus", export)[1]
    assert [line for line in lines(result) if "FAILED" in line] == [rewritten(may, backup)]
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10")
    backup.unlink()
    result = run(tmp_path, "focus", export)[1]
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)


def test_status_says_which_stale_copies_the_last_ingest_skipped_apart_from_the_copies(tmp_path):
    import yaml
    from click.testing import CliRunner

    from service.cli.main import cli

    export = export_of(tmp_path, "focus")
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "src", "kind": "focus", "location": str(export)}]}))

    def said(*args: str) -> list[str]:
        result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), *args])
        assert result.exit_code == 0, result.output
        return [line for line in result.stderr.splitlines() if line.startswith("copies: ")]

    said("ingest")
    for folder in ("2024-05-restored", "2024-06-restored"):
        shutil.copytree(export / folder[:7], export / folder, copy_function=shutil.copy)
    said("ingest")
    WRITERS["focus"](may_file(export, "focus"), [("2024-05", "USD", "1.20")])
    said("ingest")
    june, may = (next((export / f"{period}-restored").iterdir()) for period in ("2024-06", "2024-05"))
    assert said("status", "--format", "table") == [
        f"copies: source src: 1 copied file(s) under its location skipped by its last ingest (read once): {june}, the "
        f"same as {export / '2024-06' / june.name}; move copies out of the location to quiet this",
        f"copies: source src: 1 stale copied file(s) under its location skipped by its last ingest (not read: the file "
        f"each copied changed since): {may}, a copy of {may_file(export, 'focus')}; delete them or copy the files again"]
    may.unlink()
    said("ingest")
    assert len(said("status", "--format", "table")) == 1


@pytest.mark.parametrize("kind", ["focus", "aws-cur"])
def test_the_copy_of_an_original_deleted_or_renamed_counts_once_and_a_later_correction_alone(tmp_path, kind):
    """The original deleted leaves the copy the only holder of its rows: it counts, once. The
    original renamed back beside it: one of the two is read, and a correction of the renamed
    original later counts alone, the old copy stale."""
    export = export_of(tmp_path, kind)
    original = may_file(export, kind)
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)
    copy = export / "2024-05-restored" / original.name
    lake, result = run(tmp_path, kind, export)
    once = lake_sums(lake)
    assert failures(result) == [] and len(copied_lines(result)) == 1

    renamed = original.with_name("part-1" + FORMATS[kind][0])
    original.rename(renamed)
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and lake_sums(lake) == once, lines(result)
    assert copied_lines(result) == [f"src {copy}: skipped, the same bytes as {renamed} (a copy: its rows are read once)"]

    WRITERS[kind](renamed, [("2024-05", "USD", "1.20")])
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)

    renamed.unlink()
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and lake_sums(lake) == once and copied_lines(result) == [], lines(result)


@pytest.mark.parametrize("kind", ["focus", "gcp-billing"])
def test_two_copies_of_one_file_are_both_stale_once_it_is_corrected(tmp_path, kind):
    export = export_of(tmp_path, kind)
    for folder in ("2024-05-restored", "backup/2024-05"):
        shutil.copytree(export / "2024-05", export / folder, copy_function=shutil.copy)
    lake, result = run(tmp_path, kind, export)
    assert failures(result) == [] and len(copied_lines(result)) == 2
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10")
    WRITERS[kind](may_file(export, kind), [("2024-05", "USD", "1.20")])
    result = run(tmp_path, kind, export)[1]
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)
    assert len([line for line in lines(result) if "a stale copy of" in line]) == 2


@pytest.mark.parametrize("overwrite", [False, True], ids=["new-assembly", "overwrite"])
def test_a_copy_of_a_legacy_cur_part_stays_a_copy_when_aws_restates_the_period(tmp_path, overwrite):
    """A period folder copied under a name no manifest is looked for in holds a bare CSV of the
    part its manifest listed; AWS then restates May (a new assembly, or the same keys rewritten):
    the copy is a stale copy, May the restatement's alone."""
    root = tmp_path / "cur"

    def deliver(assembly: str, cost: str) -> None:
        write_legacy(local_put(root), prefix="", report="rep", period="2024-05", assembly=assembly,
                     parts=[[line("2024-05", cost=cost)]], overwrite=overwrite)

    deliver("asm-1", "1.10")
    lake, result = run(tmp_path, "aws-cur", root / "rep")
    assert failures(result) == [] and committed(result) == ["2024-05"]
    period = root / "rep" / "20240501-20240601"
    shutil.copytree(period, period.with_name(period.name + "-restored"), copy_function=shutil.copy)
    result = run(tmp_path, "aws-cur", root / "rep")[1]
    assert failures(result) == [] and len(copied_lines(result)) == 1, lines(result)

    deliver("asm-2", "1.20")
    for _ in range(2):
        result = run(tmp_path, "aws-cur", root / "rep")[1]
        assert failures(result) == [], lines(result)
        assert lake_sums(lake) == {("2024-05", "USD"): Decimal("1.20")}, lines(result)
        assert len([x for x in lines(result) if "a stale copy of" in x]) == 1, lines(result)
    if not overwrite:  # the old assembly removed: the copy is still of the export's old data
        shutil.rmtree(period / "asm-1")
        for _ in range(2):
            result = run(tmp_path, "aws-cur", root / "rep")[1]
            assert failures(result) == [], lines(result)
            assert lake_sums(lake) == {("2024-05", "USD"): Decimal("1.20")}, lines(result)  # was the copy's 1.10
            assert [x for x in lines(result) if "skipped" in x] == [
                f"src {period}-restored/asm-1/rep-1.csv.gz: skipped, a stale copy of {period}/asm-1/rep-1.csv.gz (a "
                "part its manifest listed, gone since: its rows are not read, the manifest's delivery of its period "
                "is; delete the copy)"]


@pytest.mark.parametrize("copy", ["2024-05-restored", "2024-05 (copy)", "backup/2024-05"])
def test_a_copy_keeping_the_times_there_at_the_first_ingest_is_told_from_its_original_by_its_longer_path(tmp_path, copy):
    """`cp -a 2024-05 2024-05-restored` before the first ingest: both written at once, and
    `2024-05-restored/` sorts before `2024-05/`, so the copy was taken for the original and May's
    restatement in 2024-05 counted beside it (USD 1.10 + 1.20). Of files written at once, the one
    of the shorter path (fewer folders, then fewer characters) is the original."""
    export = export_of(tmp_path, "focus")
    shutil.copytree(export / "2024-05", export / copy)  # copy2: the times kept
    lake, result = run(tmp_path, "focus", export)
    assert copied_lines(result) == [f"src {export / copy / 'part-0.csv'}: skipped, the same bytes as "
                                    f"{may_file(export, 'focus')} (a copy: its rows are read once)"], lines(result)
    WRITERS["focus"](may_file(export, "focus"), [("2024-05", "USD", "1.20")])
    result = run(tmp_path, "focus", export)[1]
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)


RESTATED = [
    ("aws-cur2", lambda root: _cur2(root, None), lambda root: _cur2(root, None, "2024-06-02T01:02:03.000Z-def")),
    ("aws-cur2", lambda root: _cur2(root, "2024-06-01T01:02:03.000Z-abc"),
     lambda root: _cur2(root, "2024-06-02T01:02:03.000Z-def", "2024-06-02T01:02:03.000Z-def")),
    ("aws-cur", _legacy, lambda root: write_legacy(local_put(root), prefix="", report="exp", period="2024-05",
                                                   assembly="asm-2", parts=[[line("2024-05", cost="1.20")]]))]


@pytest.mark.parametrize("ingested", [True, False], ids=["copy-ingested", "copy-new"])
@pytest.mark.parametrize(("kind", "write", "restate"), RESTATED, ids=["cur2-overwrite", "cur2-create-new",
                                                                       "cur-legacy"])
def test_an_export_copied_before_aws_restated_a_period_is_a_stale_copy_and_the_restatement_counts(
        tmp_path, kind, write, restate, ingested):
    """`cp -r exp exp-restored`, then AWS delivers May again into exp: two folders delivered May
    differently, so May failed (exit 3, keeping USD 1.10) until the copy was deleted. The copy's
    manifest names the files of exp, where AWS delivered it: a stale copy, skipped in one line
    (`status` tells it); May is the restatement's 1.20."""
    write(tmp_path / "loc")
    lake, result = run(tmp_path, kind, tmp_path / "loc")
    shutil.copytree(tmp_path / "loc" / "exp", tmp_path / "loc" / "exp-restored", copy_function=shutil.copy)
    if ingested:
        assert failures(run(tmp_path, kind, tmp_path / "loc")[1]) == []
    restate(tmp_path / "loc")
    for _ in range(2):
        result = run(tmp_path, kind, tmp_path / "loc")[1]
        assert failures(result) == [] and lake_sums(lake) == {("2024-05", "USD"): Decimal("1.20")}, lines(result)
        [skipped] = [line for line in lines(result) if "skipped" in line]
        copy, original = skipped.split(": skipped, ")[0][4:], lake.read_state("sources")["src"]["stale_copies"]
        assert copy.startswith(f"{tmp_path / 'loc' / 'exp-restored'}/") and original == {copy: original[copy]}
        assert original[copy].startswith(f"{tmp_path / 'loc' / 'exp'}/") and skipped.endswith(
            f"a stale copy of {original[copy]} (an older 2024-05 delivery: its manifest names that export's files; AWS "
            "delivered 2024-05 again since the copy was made: its rows are not read; delete the copy)")


@pytest.mark.parametrize(("kind", "write"), [(kind, write) for kind, write, _ in RESTATED],
                         ids=["cur2-overwrite", "cur2-create-new", "cur-legacy"])
def test_an_export_copied_keeping_the_times_is_read_from_the_folder_its_manifests_name(tmp_path, kind, write):
    """`cp -a exp exp-restored`: the manifests written at once, the first by path was read, and
    `exp-restored/` sorts before `exp/`, so the copy was taken for the export (its line named the
    export a copy). The manifests name the folder AWS delivered to: exp is read, whatever the times."""
    write(tmp_path / "loc")
    shutil.copytree(tmp_path / "loc" / "exp", tmp_path / "loc" / "exp-restored")  # copy2: the times kept
    lake, result = run(tmp_path, kind, tmp_path / "loc")
    assert failures(result) == [] and lake_sums(lake) == {("2024-05", "USD"): Decimal("1.10")}, lines(result)
    [skipped] = [line for line in lines(result) if "skipped" in line]
    assert skipped.startswith(f"src {tmp_path / 'loc' / 'exp-restored'}/") and "same 2024-05 delivery as " \
        f"{tmp_path / 'loc' / 'exp'}/" in skipped, skipped


@pytest.mark.parametrize("first", [True, False], ids=["at-the-first-ingest", "added-later"])
def test_a_bare_cur_file_of_a_period_a_manifest_delivers_fails_and_the_manifests_delivery_stays(tmp_path, first):
    """A bare CSV of May (no copy: other lines) beside the manifest's delivery of May: each run
    committed one over the other, the lake flipping between USD 1.10 and 0.40 from run to run.
    The manifest's delivery is May's; the bare file fails naming itself and the manifest (exit 3)."""
    from aws_exports import legacy_csv
    root = tmp_path / "cur" / "rep"
    write_legacy(local_put(tmp_path / "cur"), prefix="", report="rep", period="2024-05", assembly="asm-1",
                 parts=[[line("2024-05", cost="1.10")]])
    bare = root / "extra" / "may.csv"

    def add_bare() -> None:
        bare.parent.mkdir()
        bare.write_bytes(legacy_csv([line("2024-05", cost="0.40")]))

    if first:
        add_bare()
    lake = run(tmp_path, "aws-cur", root)[0]
    if not first:
        add_bare()
    for _ in range(3):
        result = run(tmp_path, "aws-cur", root)[1]
        assert lake_sums(lake) == {("2024-05", "USD"): Decimal("1.10")}, lines(result)
        [failed] = result.failed
        assert str(failed.error) == (
            f"{bare}: 2024-05 is delivered by a manifest (delivery asm-1: {root}/20240501-20240601/asm-1/rep-1.csv.gz) "
            "and by 1 file(s) in no manifest, which would replace each other — move the file(s) in no manifest out "
            "of the location, or give them a source of their own")


def test_a_copy_of_a_stale_copy_is_stale_too(tmp_path):
    """A stale copy copied again (`cp -r 2024-05-restored 2024-05-again`) held the same bytes as
    nothing read, so it was read beside the correction (USD 1.20 + 1.10); it is a stale copy of
    the same original."""
    export = export_of(tmp_path, "focus")
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)
    lake = run(tmp_path, "focus", export)[0]
    WRITERS["focus"](may_file(export, "focus"), [("2024-05", "USD", "1.20")])
    assert failures(run(tmp_path, "focus", export)[1]) == []
    shutil.copytree(export / "2024-05-restored", export / "2024-05-again", copy_function=shutil.copy)
    for _ in range(2):
        result = run(tmp_path, "focus", export)[1]
        assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)
        assert sorted(line.split(": skipped, ")[0] for line in lines(result) if "a stale copy of" in line) == [
            f"src {export / folder / 'part-0.csv'}" for folder in ("2024-05-again", "2024-05-restored")]


def test_a_stale_copy_moved_elsewhere_under_the_location_stays_stale(tmp_path):
    """`mv 2024-05-restored 2024-05-old` after 2024-05 was restated: the moved copy was a new file
    holding the same bytes as nothing read, so it counted beside the correction (USD 1.20 + 1.10)."""
    export = export_of(tmp_path, "focus")
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)
    lake = run(tmp_path, "focus", export)[0]
    WRITERS["focus"](may_file(export, "focus"), [("2024-05", "USD", "1.20")])
    assert failures(run(tmp_path, "focus", export)[1]) == []
    (export / "2024-05-restored").rename(export / "2024-05-old")
    for _ in range(2):
        result = run(tmp_path, "focus", export)[1]
        assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)
        assert [line.split(": skipped, ")[0] for line in lines(result) if "a stale copy of" in line] == [
            f"src {export / '2024-05-old' / 'part-0.csv'}"]


@pytest.mark.parametrize("cost", ["1.20", "1.2345"], ids=["same-size", "other-size"])
@pytest.mark.parametrize("move", ["folder", "file"])
def test_a_stale_copy_stays_stale_when_its_corrected_original_is_renamed_under_the_location(tmp_path, move, cost):
    """`cp -r 2024-05 2024-05-restored`, May corrected (1.10 to 1.20), then `mv 2024-05
    2024-05-final` (or part-0 renamed part-1): the copy's original was gone from the listing, so
    the copy held the only rows left and counted beside the renamed correction (USD 2.30). The
    renamed file holds the bytes remembered for the original: it is the original, the copy stays
    stale and names it."""
    export = export_of(tmp_path, "focus")
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)
    lake = run(tmp_path, "focus", export)[0]
    WRITERS["focus"](may_file(export, "focus"), [("2024-05", "USD", cost)])
    assert failures(run(tmp_path, "focus", export)[1]) == []
    if move == "folder":
        (export / "2024-05").rename(export / "2024-05-final")
        renamed = export / "2024-05-final" / "part-0.csv"
    else:
        renamed = may_file(export, "focus").with_name("part-1.csv")
        may_file(export, "focus").rename(renamed)
    for _ in range(2):
        result = run(tmp_path, "focus", export)[1]
        assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal(cost), lines(result)
        assert [line for line in lines(result) if "a stale copy of" in line] == [
            f"src {export / '2024-05-restored' / 'part-0.csv'}: skipped, a stale copy of {renamed} (the same bytes "
            "when it was found, that file changed since: its rows are not read; delete the copy or copy the file again)"]


def test_a_stale_copy_whose_corrected_original_is_deleted_counts_and_warns_its_rows_are_older(tmp_path):
    """The corrected original deleted (`rm -r 2024-05` after May was restated to 1.20): the stale
    copy holds the only rows left and counts, as README says, but silently May went back to the
    copy's USD 1.10; the commit now warns, once, that they are an older version of a deleted file."""
    export = export_of(tmp_path, "focus")
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)
    lake = run(tmp_path, "focus", export)[0]
    WRITERS["focus"](may_file(export, "focus"), [("2024-05", "USD", "1.20")])
    assert failures(run(tmp_path, "focus", export)[1]) == []
    shutil.rmtree(export / "2024-05")
    result = run(tmp_path, "focus", export)[1]
    copy = export / "2024-05-restored" / "part-0.csv"
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10"), lines(result)
    assert [w for o in result.outcomes for w in o.warnings] == [
        f"{copy}: read, its rows the only ones left of {may_file(export, 'focus')}, gone since; but it was a stale "
        "copy of that file, corrected after the copy was made: these rows are an older version of a deleted file (put "
        "the corrected file back, or delete the copy)"]
    result = run(tmp_path, "focus", export)[1]
    assert [w for o in result.outcomes for w in o.warnings] == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal(
        "1.10")
    may_file(export, "focus").parent.mkdir()  # the corrected file put back, as the warning says: the copy is stale
    WRITERS["focus"](may_file(export, "focus"), [("2024-05", "USD", "1.20")])
    for _ in range(2):
        result = run(tmp_path, "focus", export)[1]
        assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)
        assert [line.split(": skipped, ")[0] for line in lines(result) if "a stale copy of" in line] == [f"src {copy}"]


def test_a_header_only_file_taken_for_a_copy_that_then_gets_rows_counts_them(tmp_path):
    """part-0 and part-1 of May written with a header alone are the same bytes, one taken for a
    copy of the other; the exporter then writes May's rows into the 'copy': the original committed
    no row, so nothing is counted twice and the rows count (no failed period)."""
    export = export_of(tmp_path, "focus")
    may_file(export, "focus").write_text(may_file(export, "focus").read_text().splitlines()[0] + "\n")
    second = may_file(export, "focus").with_name("part-1.csv")
    shutil.copy(may_file(export, "focus"), second)
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and ("2024-05", "USD") not in lake_sums(lake), lines(result)
    WRITERS["focus"](second if copied_lines(result)[0].startswith(f"src {second}") else may_file(export, "focus"),
                     [("2024-05", "USD", "1.10")])
    result = run(tmp_path, "focus", export)[1]
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10"), lines(result)


@pytest.mark.parametrize("kind", ["focus", "gcp-billing"])
def test_a_file_of_a_deleted_originals_size_is_read_for_its_digest_once_not_on_every_ingest(tmp_path, kind,
                                                                                          monkeypatch):
    """A stale copy read once its corrected original (other size) was deleted: each ingest looked for
    that original renamed, and read July's file, of its size, for a digest every time (on S3 a
    download every run); an unchanged file's digest is remembered (path, size, version)."""
    from connectors.base import StoredExport

    read: list[str] = []
    digest = StoredExport.content_digest
    monkeypatch.setattr(StoredExport, "content_digest", lambda self, uri, scratch: read.append(uri) or digest(
        self, uri, scratch))
    export = export_of(tmp_path, kind)
    shutil.copytree(export / "2024-05", export / "2024-05-restored", copy_function=shutil.copy)
    lake = run(tmp_path, kind, export)[0]
    WRITERS[kind](may_file(export, kind), [("2024-05", "USD", "1.2345")])
    assert failures(run(tmp_path, kind, export)[1]) == []
    shutil.rmtree(export / "2024-05")
    july = export / "2024-07" / may_file(export, kind).name
    july.parent.mkdir()
    WRITERS[kind](july, [("2024-07", "USD", "1.2345")])  # the corrected May's size: is it May renamed?
    said = []
    for _ in range(3):
        read.clear()
        result = run(tmp_path, kind, export)[1]
        assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10"), lines(result)
        said.append(list(read))
    assert said == [[str(july)], [], []]
    july.write_bytes(july.read_bytes())  # rewritten: read again, once
    for expected in ([str(july)], []):
        read.clear()
        run(tmp_path, kind, export)
        assert read == expected


def test_a_copy_keeping_the_times_under_a_shorter_path_is_taken_for_the_original_every_run_never_summed(tmp_path):
    """`cp -a exports/2024-05 2024-05` before the first ingest: written at once, the shorter path is
    taken for the original, as README says, and stays it; the exporter's correction of the longer
    one is then a copy changed beside an unchanged original: May fails (exit 3) keeping USD 1.10,
    never 1.10 + 1.20, until the copy goes (pinned: it was so)."""
    export = tmp_path / "export"
    original = export / "exports" / "2024-05" / "part-0.csv"
    original.parent.mkdir(parents=True)
    WRITERS["focus"](original, [("2024-05", "USD", "1.10")])
    shutil.copytree(original.parent, export / "2024-05")  # copy2: the times kept
    copy = export / "2024-05" / "part-0.csv"
    lake = None
    for _ in range(2):
        lake, result = run(tmp_path, "focus", export)
        assert copied_lines(result) == [f"src {original}: skipped, the same bytes as {copy} (a copy: its rows are "
                                        "read once)"], lines(result)
    WRITERS["focus"](original, [("2024-05", "USD", "1.20")])
    result = run(tmp_path, "focus", export)[1]
    assert [line for line in lines(result) if "FAILED" in line] == [rewritten(original, copy)]
    assert lake_sums(lake)[("2024-05", "USD")] == Decimal("1.10")
    copy.unlink()
    result = run(tmp_path, "focus", export)[1]
    assert failures(result) == [] and lake_sums(lake)[("2024-05", "USD")] == Decimal("1.20"), lines(result)


def test_status_names_a_copy_rewritten_beside_its_original_while_it_holds_its_period_back(tmp_path):
    """A copy changed while its original did not fails its period (exit 3) on every ingest, and
    `status` said nothing of it; it names the copy, why its period is not committed and what to do,
    until the copy is gone."""
    import yaml
    from click.testing import CliRunner

    from service.cli.main import cli

    export = export_of(tmp_path, "focus")
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "src", "kind": "focus", "location": str(export)}]}))

    def said(*args: str, code: int = 0) -> list[str]:
        result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), *args])
        assert result.exit_code == code, result.output
        return [line for line in result.stderr.splitlines() if line.startswith("copies: ")]

    shutil.copytree(export / "2024-05", export / "2024-05-backup", copy_function=shutil.copy)
    said("ingest")
    copy = export / "2024-05-backup" / "part-0.csv"
    WRITERS["focus"](copy, [("2024-05", "USD", "0.40")])
    for _ in range(2):
        said("ingest", code=3)
        assert said("status", "--format", "table") == [
            f"copies: source src: 1 copied file(s) under its location changed since they were found while the file "
            "each copied did not (their period not committed: the lake keeps what it held, and reading both would "
            f"count it twice): {copy}, a copy of {may_file(export, 'focus')}; delete the copy or backup, or move it "
            "out of the location (a file of its own: give it a new name)"]
    copy.unlink()
    said("ingest")
    assert said("status", "--format", "table") == []
