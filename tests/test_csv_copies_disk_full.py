"""A UTF-16 CSV or a .csv.zip is read from a UTF-8 copy in the lake's scratch (connectors.csvfile
local_csv); a full disk while writing that copy says disk full and where, not a damaged file."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

from connectors.csvfile import local_csv
from connectors.source_folder import Folder
from service.core.errors import DataError, ResourceError

TEXT = "BilledCost,ChargePeriodStart\n1.5,2024-09-01T00:00:00Z\n"


def zipped(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("cost.csv", text)
    return buffer.getvalue()


@pytest.mark.parametrize("name, content", [("cost.csv", TEXT.encode("utf-16")), ("cost.csv.zip", zipped(TEXT))])
def test_a_full_disk_while_copying_says_disk_full_and_where_not_a_damaged_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # the copy's name in scratch, linked to /dev/full: every write fails ENOSPC, as on a full disk
    (scratch / (hashlib.sha256(str(path).encode()).hexdigest()[:24] + ".csv")).symlink_to("/dev/full")
    with pytest.raises(ResourceError) as raised:
        local_csv(path, scratch, str(path), Folder(tmp_path, "sources[0].location").open)
    assert str(raised.value.message).startswith("disk full: [Errno 28] No space left on device")
    assert raised.value.where == str(scratch) and "free disk space" in raised.value.hint
    assert raised.value.exit_code == 3 and not isinstance(raised.value, DataError)
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("name, content", [("cut.csv", TEXT.encode("utf-16")[:-1]), ("cut.csv.zip", zipped(TEXT)[:-30])])
def test_a_file_cut_short_is_still_a_damaged_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    (tmp_path / "scratch").mkdir()
    with pytest.raises(DataError, match="re-export it"):
        local_csv(path, tmp_path / "scratch", str(path), Folder(tmp_path, "sources[0].location").open)
