import pytest

from kafkad.config.properties import PropertiesSyntaxError, parse_properties


def test_separators_comments_and_lines() -> None:
    text = "# comment\n! also\n\na=1\nb: 2\nc 3\n  d   =   4  \ne=\n"
    got = [(e.key, e.value, e.line) for e in parse_properties(text)]
    assert got == [("a", "1", 4), ("b", "2", 5), ("c", "3", 6), ("d", "4  ", 7), ("e", "", 8)]


def test_continuation_and_escapes() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT://b:2\nkey\\=x=v\\tw\\u0041\\\\\n"
    got = [(e.key, e.value, e.line) for e in parse_properties(text)]
    assert got == [("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2", 1), ("key=x", "v\twA\\", 3)]


def test_bad_unicode_escape_names_line() -> None:
    with pytest.raises(PropertiesSyntaxError) as e:
        parse_properties("a=1\nb=\\u12\n")
    assert e.value.line == 2
