"""Tables for people fit the terminal: a table wider than it leaves whole columns out (the
command's least important first, never the first column or its money) and says which,
instead of cutting every cell to one letter (`│ l… │ p… │` in an 80-column terminal)."""

from __future__ import annotations

from decimal import Decimal

from service.cli.output import print_table, shown

RUN = {"run": "llama-405b-r1", "team": "pretrain", "project": "llama-405b", "experiment": "llama-405b",
       "job type": "pretrain", "GPUs": "88", "GPU-h": "14,174.3", "cost": "174,202.23", "currency": "USD",
       "state": "RUNNING", "start": "2026-11-23T13:57:07Z", "end": ""}


def test_an_80_column_terminal_shows_whole_columns_and_names_the_others(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    print_table([RUN], list(RUN), footer={"run": "total", "cost": "174,202.23"}, right=("GPUs", "GPU-h", "cost"),
                whole=("cost",))
    out, err = capsys.readouterr()
    assert "llama-405b-r1" in out and "174,202.23" in out and "pretrain" in out
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    assert err.startswith("not shown at 80 columns: ") and "start, end" in err and "--format csv or json" in err


def test_a_wide_terminal_shows_every_column(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "250")
    print_table([RUN], list(RUN), whole=("cost",))
    out, err = capsys.readouterr()
    assert all(column in out for column in RUN) and "2026-11-23T13:57:07Z" in out and err == ""


def test_columns_are_left_out_from_the_last_but_never_the_kept_ones():
    widths = {"run": 10, "a": 10, "cost": 10, "b": 10}  # each column is 13 wide in the table
    assert shown(list(widths), widths, 53, keep=("run", "cost")) == ["run", "a", "cost", "b"]
    assert shown(list(widths), widths, 52, keep=("run", "cost")) == ["run", "a", "cost"]
    assert shown(list(widths), widths, 30, keep=("run", "cost")) == ["run", "cost"]
    assert shown(list(widths), widths, 5, keep=("run", "cost")) == ["run", "cost"]  # kept even past the width


def test_late_columns_are_left_out_after_the_others_from_their_last():
    widths = {"run": 10, "a": 10, "state": 10, "b": 10}  # each column is 13 wide in the table
    assert shown(list(widths), widths, 40, keep=("run",), late=("state",)) == ["run", "a", "state"]
    assert shown(list(widths), widths, 39, keep=("run",), late=("state",)) == ["run", "state"]
    assert shown(list(widths), widths, 30, keep=("run",), late=("state", "b")) == ["run", "state"]
    assert shown(list(widths), widths, 20, keep=("run",), late=("state",)) == ["run"]


def test_money_cells_keep_every_decimal_given(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "40")
    print_table([{"team": "nlp", "cost": Decimal("1234567.123456789012")}], ["team", "cost"], whole=("cost",))
    assert "1234567.123456789012" in capsys.readouterr().out


def test_the_currency_stays_when_the_rows_hold_several(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "40")
    rows = [{"team": "nlp", "project": "a-long-project-name", "currency": currency, "cost": "10.00"}
            for currency in ("USD", "EUR")]
    print_table(rows, ["team", "project", "currency", "cost"], whole=("cost",))
    out, err = capsys.readouterr()
    assert "EUR" in out and "USD" in out and "project" in err
    print_table(rows[:1], ["team", "project", "currency", "cost"], whole=("cost",))
    assert "currency" in capsys.readouterr().err  # one currency: it gives way like the rest


def test_a_title_naming_a_cluster_or_run_shows_its_controls_and_brackets_as_text(monkeypatch, capsys):
    # demo and runs --run titles carry names from the config and the job records
    monkeypatch.setenv("COLUMNS", "120")
    print_table([{"run": "r1"}], ["run"], title="jobs of \x1b]0;owned\x07[red]r1[/red]")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;owned\\x07[red]r1[/red]" in "".join(out.split())  # the title wraps to the table's width


def test_a_command_without_format_names_where_the_left_out_columns_show(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")  # `spendlake demo` prints its findings tables with no --format to take
    print_table([RUN], list(RUN), whole=("cost",), elsewhere="`spendlake findings --format json` shows them in full")
    err = capsys.readouterr().err
    assert err.startswith("not shown at 80 columns: ") and "--format csv or json" not in err
    assert err.rstrip().endswith("(a wider terminal shows them; `spendlake findings --format json` shows them in full)")


def test_tables_sharing_what_they_told_name_the_same_left_out_columns_once(monkeypatch, capsys):
    # `spendlake demo`'s two findings tables both leave out resource at 80 columns: said twice
    monkeypatch.setenv("COLUMNS", "80")
    told: set[str] = set()
    for _ in range(2):
        print_table([RUN], list(RUN), whole=("cost",), elsewhere="`spendlake findings --format json` shows them",
                    told=told)
    err = capsys.readouterr().err
    assert err.count("not shown at 80 columns: ") == 1, err
