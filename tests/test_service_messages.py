"""What `spendlake serve` says of itself speaks of the service, not of a command run by hand
(break53 finding 11): its report folder is report.out and it tries the report again by itself."""

from __future__ import annotations

import itertools
from datetime import date

import pytest
from servicekit import commit, make_config

from service.core.errors import ResourceError
from service.core.lake import Lake
from service.serve.daily import SERVICE_AGAIN, write_daily_report

ROWS = [("2026-11-28 03:00:00", "2026-11-28 04:00:00", "USD", "2", {}),
        ("2026-11-29 23:00:00", "2026-11-30 00:30:00", "USD", "5", {})]


def test_the_daily_report_on_a_full_disk_names_report_out_and_says_the_service_tries_again(tmp_path, monkeypatch):
    """Was '— free space on the --out folder's file system ..., then run the command again': serve has no
    --out, and tries the report again by itself; a report.out the config does not set is named as the default."""
    from service.core import publish

    config = make_config(tmp_path)
    commit(Lake.of(config), "cur", ROWS)
    monkeypatch.setattr(publish, "open", lambda path, mode: open("/dev/full", mode), raising=False)
    with pytest.raises(ResourceError) as refused:
        write_daily_report(config, date(2026, 11, 29))
    assert refused.value.hint == ("free space on the report.out (not set: the default) folder's file system (or "
                                  f"choose another folder), {SERVICE_AGAIN}; what the folder held before is intact")
    # as though the config set it; monkeypatch puts it back: a config without a report section shares its default
    monkeypatch.setitem(config.report.__dict__, "out", str(tmp_path / "reports"))
    with pytest.raises(ResourceError) as refused:
        write_daily_report(config, date(2026, 11, 29))
    assert refused.value.hint.startswith("free space on the report.out folder's file system")


def test_a_daily_report_the_lake_keeps_changing_under_says_the_service_tries_again_not_run_the_command(
        tmp_path, monkeypatch):
    """Ingests committing under each of the report's gathers: serve's log said 'run `spendlake report` again
    once the ingests running now have finished', a command the operator of a service need not run."""
    from service.core.errors import DataError
    from service.report import write

    config = make_config(tmp_path)
    lake = Lake.of(config)
    commit(lake, "cur", ROWS)
    deliveries = itertools.count()

    def committing(config, lake, day):  # an ingest commits while each gather reads
        commit(lake, "cur", ROWS, delivery_id=f"d{next(deliveries)}")

    monkeypatch.setattr(write, "gather", committing)
    with pytest.raises(DataError, match="changed under the report 3 times") as failed:
        write_daily_report(config, date(2026, 11, 29))
    assert failed.value.hint == SERVICE_AGAIN
    with pytest.raises(DataError) as failed:  # the command's own words stay
        write.write_report(config, date(2026, 11, 29))
    assert failed.value.hint.startswith("run `spendlake report` again")


def test_a_sighup_while_the_config_file_is_gone_says_so_and_keeps_the_running_config(tmp_path):
    """Was 'SIGHUP: the config was not reloaded ...: config file not found — pass --config PATH or set
    $SPENDLAKE_CONFIG': the service was given the file, which is gone."""
    from service.core.config import load_config
    from service.serve.config_watch import GONE_MESSAGE
    from service.serve.service import Service

    path = tmp_path / "spendlake.yaml"
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0'}}\n")
    service = Service(load_config(path), reload=lambda: load_config(path))
    path.unlink()
    said = []
    assert service.reloaded(said.append) is None
    assert said == [f"SIGHUP: {GONE_MESSAGE} ({path})"] and "--config" not in said[0]


def test_a_taken_default_address_is_named_as_the_default_and_a_taken_port_makes_no_lake_folder(tmp_path, monkeypatch):
    """Was 'service.listen: cannot listen on 127.0.0.1:9464' with no service.listen in the config; and a
    serve failing on a taken port had already made <lake>/_locks and <lake>/_state in a new lake folder."""
    import socket

    from service.core.config import parse_config
    from service.core.errors import ConfigError
    from service.serve.service import Service

    with socket.create_server(("127.0.0.1", 0)) as taken:
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        lake = tmp_path / "new" / "lake"
        unset = parse_config({"lake": str(lake)}, str(tmp_path / "spendlake.yaml"))
        monkeypatch.setitem(unset.service.__dict__, "listen", address)  # as though it were the default
        with pytest.raises(ConfigError) as refused:
            Service(unset).run(lambda line: None)
        assert str(refused.value).startswith(f"service.listen (not set: the default): cannot listen on {address}: ")
        assert not (tmp_path / "new").exists()
        named = parse_config({"lake": str(lake), "service": {"listen": address}}, str(tmp_path / "spendlake.yaml"))
        with pytest.raises(ConfigError) as refused:
            Service(named).run(lambda line: None)
        assert str(refused.value).startswith(f"service.listen: cannot listen on {address}: ")
        assert not (tmp_path / "new").exists()


def test_making_a_service_binds_nothing_and_a_run_failing_before_it_serves_lets_its_address_go(tmp_path, monkeypatch):
    """Service(config) bound service.listen (and made the lake folder), and a run() failing before it served,
    as when another service holds the lake, left the address bound until the process ended."""
    import socket

    from service.core.errors import LakeBusyError
    from service.serve import service as service_module

    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    config = make_config(tmp_path, listen=f"127.0.0.1:{port}")
    service = service_module.Service(config)
    assert service.bound is None and not (tmp_path / "lake").exists()

    def held(lake, config):
        raise LakeBusyError("another spendlake serve holds the lake", where="lake")

    monkeypatch.setattr(service_module, "serving_or_reading", held)
    with pytest.raises(LakeBusyError):
        service.run(lambda line: None)
    assert service.bound is None
    with socket.create_server(("127.0.0.1", port)):  # free again: was 'Address already in use'
        pass


def test_a_reload_onto_another_lake_pins_that_lake_as_a_start_does(tmp_path):
    """review54 item 4's reload half: taken_over_by pins the new config's lake folder (made when missing)
    before the running service lets go; nothing held that, a lake moved away after a SIGHUP onto it would
    come back as a new empty one."""
    from service.core.config import load_config
    from service.core.errors import DataError
    from service.serve.service import Service

    path = tmp_path / "spendlake.yaml"
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice: {{listen: '127.0.0.1:0'}}\n")
    service = Service(load_config(path), reload=lambda: load_config(path))
    path.write_text(f"lake: {tmp_path / 'other'}\nservice: {{listen: '127.0.0.1:0'}}\n")
    said = []
    successor = service.reloaded(said.append)
    assert successor is not None and successor.lake.root == tmp_path / "other", said
    (tmp_path / "other").rename(tmp_path / "moved")
    with pytest.raises(DataError, match="the lake folder is gone"):
        successor.lake.write_state("jobs", {})
    assert not (tmp_path / "other").exists()
