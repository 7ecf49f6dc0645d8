"""A source's `location` moved to another path with the same files (`cp -a` or `rsync -a` to a new
disk, `mv` across file systems: new inodes and change times, the same paths under it, sizes and
modification times) is "unchanged", not every period committed again; its ledger entries name the
files where they are now. Files copied without their times are read again. Neither ever counts a
period twice (RELIABILITY 1, 39)."""

from __future__ import annotations

import os
import shutil

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.lake import Lake
from tests.conftest import SAMPLES

FILES = {"a/part-0.csv": SAMPLES / "focus" / "focus_1.0_sample_1000.csv",  # one name: each file found by its path
         "b/part-0.csv": SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"}


def ingest(tmp_path, location) -> list[str]:
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "f", "kind": "focus", "location": str(location)}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def figures(tmp_path) -> dict:
    return {e.billing_period: (e.delivery_id, e.rows, e.totals, e.ingested_at, e.sha256)
            for e in Lake(tmp_path / "lake").ledger()}


def exported(tmp_path):
    export = tmp_path / "export"
    for key, sample in FILES.items():
        (export / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(sample, export / key)
    return export


def test_a_location_copied_with_its_times_to_another_disk_is_unchanged_and_the_ledger_names_the_new_files(tmp_path):
    export = exported(tmp_path)
    assert any("committed" in line for line in ingest(tmp_path, export))
    before = figures(tmp_path)
    moved = shutil.copytree(export, tmp_path / "disk2" / "billing")  # copy2: the times kept, new inodes
    shutil.rmtree(export)
    for _ in range(2):  # and again: the move is remembered
        said = ingest(tmp_path, moved)
        assert said and all(": unchanged (delivery" in line for line in said), said
        assert figures(tmp_path) == before
    files = {uri for e in Lake(tmp_path / "lake").ledger() for uri in e.files}
    assert files == {str(moved / key) for key in FILES}
    (moved / "a" / "part-0.csv").write_text((moved / "a" / "part-0.csv").read_text().replace("\n", "\r\n"))  # re-exported
    said = ingest(tmp_path, moved)
    assert any("committed" in line for line in said) and any("unchanged" in line for line in said), said
    assert {p: f[1:3] for p, f in figures(tmp_path).items()} == {p: f[1:3] for p, f in before.items()}


def test_a_location_copied_without_its_times_is_read_again_and_counts_once(tmp_path):
    export = exported(tmp_path)
    ingest(tmp_path, export)
    before = figures(tmp_path)
    copied = shutil.copytree(export, tmp_path / "copy", copy_function=shutil.copy)  # new modification times
    said = ingest(tmp_path, copied)
    assert all("committed" in line for line in said), said
    assert {p: f[1:3] for p, f in figures(tmp_path).items()} == {p: f[1:3] for p, f in before.items()}
    assert {uri for e in Lake(tmp_path / "lake").ledger() for uri in e.files} == {str(copied / k) for k in FILES}


def test_a_file_under_the_moved_location_with_its_size_and_times_but_other_bytes_is_read_again(tmp_path):
    """A file at the same path under the new location, of the size and modification time (to the
    nanosecond) of one recorded there but rewritten (its last line's cost), is not the one moved."""
    export = exported(tmp_path)
    ingest(tmp_path, export)
    before = figures(tmp_path)
    moved = shutil.copytree(export, tmp_path / "disk2" / "billing")
    shutil.rmtree(export)
    rewritten = moved / "a" / "part-0.csv"
    times = rewritten.stat()
    data = rewritten.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n")
    assert data.count(b',-0.00002600000,"/providers', last) == 1
    rewritten.write_bytes(data[:last] + data[last:].replace(b',-0.00002600000,"/providers', b',-0.00009600000,"/providers'))
    os.utime(rewritten, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert (rewritten.stat().st_size, rewritten.stat().st_mtime_ns) == (times.st_size, times.st_mtime_ns)
    said = ingest(tmp_path, moved)
    assert any("committed" in line for line in said) and any("unchanged" in line for line in said), said
    after = figures(tmp_path)
    changed = [p for p in before if after[p][2] != before[p][2]]
    assert len(changed) == 1 and after[changed[0]][0] != before[changed[0]][0], (before, after)


def test_a_file_recorded_without_its_sampled_bytes_gains_them_at_the_next_ingest_and_then_moves_unchanged(tmp_path):
    """file_periods.json written before the sampled bytes: a file that seems moved and whose bytes
    are not known is read again (never taken unseen); an ingest finding it unchanged records them."""
    import json

    export = exported(tmp_path)
    ingest(tmp_path, export)
    before = figures(tmp_path)
    cache = tmp_path / "lake" / "_state" / "file_periods.json"
    known = json.loads(cache.read_text())
    cache.write_text(json.dumps({s: {k: {f: v for f, v in r.items() if f != "sample"} for k, r in records.items()}
                                 for s, records in known.items()}))
    said = ingest(tmp_path, export)
    assert all(": unchanged (delivery" in line for line in said), said
    assert json.loads(cache.read_text()) == known
    moved = shutil.copytree(export, tmp_path / "disk2" / "billing")
    shutil.rmtree(export)
    said = ingest(tmp_path, moved)
    assert said and all(": unchanged (delivery" in line for line in said), said
    assert figures(tmp_path) == before


def with_a_cost_changed_outside_the_sample(data: bytes) -> bytes:
    """`data` with one line's BilledCost (its second column) changed in its last digit, the line
    wholly outside every byte `sampled_digest` reads: the same size."""
    import re

    from connectors.file_versions import SAMPLE_BLOCK, SAMPLE_BLOCKS, SAMPLE_EDGE

    inner = len(data) - 2 * SAMPLE_EDGE
    sampled = [(0, SAMPLE_EDGE), (len(data) - SAMPLE_EDGE, len(data))] + [
        (start, start + SAMPLE_BLOCK) for n in range(1, SAMPLE_BLOCKS + 1)
        for start in [SAMPLE_EDGE + inner * n // (SAMPLE_BLOCKS + 1)]]
    at = 0
    for line in data.split(b"\n"):
        end = at + len(line)
        cost = re.match(rb'[^,"]*,"?(-?\d+\.\d*[0-8])[,"]', line)
        if cost and not any(start < end and at < stop for start, stop in sampled):
            digit = at + cost.end(1) - 1  # 1e-11 more: the ledger's sums hold 12 decimals
            return data[:digit] + bytes([data[digit] + 1]) + data[digit + 1:]
        at = end + 1
    raise AssertionError("no cost line outside the sampled bytes")


def test_a_file_copied_with_its_times_and_changed_between_the_sampled_bytes_is_read_again_while_its_original_is_there(
        tmp_path):
    """`cp -a` to the new location, then one cost rewritten outside the sampled bytes, size and times
    kept: the samples agree, but the original still at its old path shows the bytes differ."""
    export = exported(tmp_path)
    ingest(tmp_path, export)
    before = figures(tmp_path)
    copied = shutil.copytree(export, tmp_path / "disk2" / "billing")  # the original kept
    rewritten = copied / "a" / "part-0.csv"
    times, data = rewritten.stat(), rewritten.read_bytes()
    rewritten.write_bytes(with_a_cost_changed_outside_the_sample(data))
    os.utime(rewritten, ns=(times.st_atime_ns, times.st_mtime_ns))
    said = ingest(tmp_path, copied)
    assert any("committed" in line for line in said) and any("unchanged" in line for line in said), said
    after = figures(tmp_path)
    changed = [p for p in before if after[p][2] != before[p][2]]
    assert len(changed) == 1 and after[changed[0]][0] != before[changed[0]][0], (before, after)
