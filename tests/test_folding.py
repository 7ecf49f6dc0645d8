"""Values fold in Python exactly as DuckDB's lower(trim()) folds the lines they are compared with, in NFC."""

from __future__ import annotations

import sys
import unicodedata

import duckdb

from service.core.folding import SPACES, folded, folded_forms


def test_every_code_point_folds_as_duckdb_lowercases_and_trims_it():
    chars = [chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF]
    rows = duckdb.connect().execute("SELECT c, lower(trim(c || 'x' || c || c)), lower(trim(nfc_normalize(c || 'x' || c "
                                    "|| c))) FROM unnest(?) AS t(c)", [chars]).fetchall()
    # as a bill writes it (NFC), exactly what SQL compares with the lines
    composed = [(c + "x" + c + c, duck) for c, duck, _ in rows if unicodedata.is_normalized("NFC", c + "x" + c + c)]
    assert len(composed) > 1_000_000
    assert [text for text, duck in composed if folded(text) != duck] == []
    # as it is typed, composed or not (NFD: macOS), what SQL gives the composed text
    typed = [(form, duck) for c, _, duck in rows for form in {c + "x" + c + c, unicodedata.normalize("NFD", c + "x" + c + c)}]
    assert [text for text, duck in typed if folded(text) != duck] == []
    assert SPACES == "".join(c for c in chars if unicodedata.category(c) == "Zs")


def test_a_line_written_decomposed_lowers_in_sql_to_one_of_the_forms_a_value_is_compared_in():
    chars = [chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF]
    texts = [unicodedata.normalize("NFD", c + "x" + c + c) for c in chars]
    rows = duckdb.connect().execute("SELECT t, lower(trim(t)) FROM unnest(?) AS u(t)", [texts]).fetchall()
    # `İ` decomposed (I + U+0307) too, which SQL lowers to i + U+0307 where the value `İ` folds to `i`
    assert [text for text, duck in rows if duck not in folded_forms(text)] == []
    assert folded_forms(" Team-A ") == ["team-a"] and folded_forms("Zürich") == ["zürich", "zu\u0308rich"]


def test_dotted_capital_i_typed_any_way_is_one_value_compared_with_both_lines():
    # composed İ lowers in SQL to i, decomposed (I + U+0307) to i + U+0307, Python's lower of İ
    for typed in ("İzmir", "I\u0307zmir", "i\u0307zmir", " İZMIR "):
        assert folded(typed) == "izmir" and folded_forms(typed) == ["izmir", "i\u0307zmir"], typed
    assert folded_forms("İstanbul Zürich") == ["istanbul zürich", "istanbul zu\u0308rich", "i\u0307stanbul zu\u0308rich"]


def test_words_fold_without_pythons_context_rules():
    con = duckdb.connect()
    for word in (" İSTANBUL ", "ΟΔΥΣΣΕΥΣ", "ΣΑΣ ΣΑΣ", "\tteam-a\n", "\u3000Straße\u00a0", "Ǆemal"):
        [(duck,)] = con.execute("SELECT lower(trim(?))", [word]).fetchall()
        assert folded(word) == duck, word


def test_a_value_typed_decomposed_folds_as_the_composed_one_duckdb_lowercases():
    con = duckdb.connect()
    for composed in ("Ünallocated ✨", "Équipe Zürich", "ÅNGSTRÖM", "한국어", "İSTANBUL"):
        decomposed = unicodedata.normalize("NFD", composed)
        assert decomposed != composed
        [(duck,)] = con.execute("SELECT lower(trim(?))", [composed]).fetchall()
        assert folded(decomposed) == folded(composed) == duck, composed
