"""Values fold in Python exactly as DuckDB's lower(trim()) folds the lines they are compared with."""

from __future__ import annotations

import sys
import unicodedata

import duckdb

from service.core.folding import SPACES, folded


def test_every_code_point_folds_as_duckdb_lowercases_and_trims_it():
    chars = [chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF]
    rows = duckdb.connect().execute("SELECT c, lower(trim(c || 'x' || c || c)) FROM unnest(?) AS t(c)", [chars]).fetchall()
    assert [c for c, duck in rows if folded(c + "x" + c + c) != duck] == []
    assert SPACES == "".join(c for c in chars if unicodedata.category(c) == "Zs")


def test_words_fold_without_pythons_context_rules():
    con = duckdb.connect()
    for word in (" İSTANBUL ", "ΟΔΥΣΣΕΥΣ", "ΣΑΣ ΣΑΣ", "\tteam-a\n", "\u3000Straße\u00a0", "Ǆemal"):
        [(duck,)] = con.execute("SELECT lower(trim(?))", [word]).fetchall()
        assert folded(word) == duck, word
