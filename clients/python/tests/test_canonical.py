"""Canonical JSON rows (docs/protocol.md §2): input, expected bytes or refusal."""

from __future__ import annotations

import pytest

from wharf_client.canonical import DEPTH_MAX, CanonicalError, canonicalize, parse_closed

ROWS = [
    # (what, value, RFC 8785, legacy Go)
    ("null", None, b"null", b"null"),
    ("booleans", [True, False], b"[true,false]", b"[true,false]"),
    ("minus zero", -0, b"0", b"0"),
    ("i64 min", -(2**63), b"-9223372036854775808", b"-9223372036854775808"),
    ("u64 max", 2**64 - 1, b"18446744073709551615", b"18446744073709551615"),
    ("no whitespace, sorted", {"b": 1, "a": [1, 2]}, b'{"a":[1,2],"b":1}', b'{"a":[1,2],"b":1}'),
    ("short escapes", '"\\\b\f\n\r\t', b'"\\"\\\\\\b\\f\\n\\r\\t"', b'"\\"\\\\\\b\\f\\n\\r\\t"'),
    ("other controls in lowercase hex", "\x00\x07\x1f", b'"\\u0000\\u0007\\u001f"', b'"\\u0000\\u0007\\u001f"'),
    ("DEL and slash are themselves", "\x7f/", b'"\x7f/"', b'"\x7f/"'),
    ("html characters", "<a&b>", b'"<a&b>"', b'"\\u003ca\\u0026b\\u003e"'),
    ("line and paragraph separators", "\u2028\u2029", '"\u2028\u2029"'.encode(), b'"\\u2028\\u2029"'),
    ("non-ASCII is UTF-8", "é😀", '"é😀"'.encode(), '"é😀"'.encode()),
    ("keys escape too", {"<": 1}, b'{"<":1}', b'{"\\u003c":1}'),
    # U+FF61 sorts after U+1F600 by code point but before it by UTF-16 code units (D83D).
    ("keys sort by UTF-16 code units", {"\uff61": 1, "\U0001f600": 2}, '{"😀":2,"｡":1}'.encode(), '{"😀":2,"｡":1}'.encode()),
    ("empty containers", {"a": {}, "b": []}, b'{"a":{},"b":[]}', b'{"a":{},"b":[]}'),
]


@pytest.mark.parametrize("what,value,rfc,legacy", ROWS, ids=[r[0] for r in ROWS])
def test_canonical_forms(what: str, value: object, rfc: bytes, legacy: bytes) -> None:
    assert canonicalize(value) == rfc, what
    assert canonicalize(value, legacy_go=True) == legacy, what


def nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


REFUSED = [
    ("a float", {"a": 1.0}),
    ("a float in a list", [0.5]),
    ("below i64", -(2**63) - 1),
    ("above u64", 2**64),
    ("a lone surrogate", "\ud800"),
    ("a non-string key", {1: 1}),
    ("a set", {1}),
    ("one level too deep", nested(DEPTH_MAX + 1)),
]


@pytest.mark.parametrize("what,value", REFUSED, ids=[r[0] for r in REFUSED])
def test_values_without_a_canonical_form_are_refused(what: str, value: object) -> None:
    with pytest.raises(CanonicalError):
        canonicalize(value)


def test_the_deepest_nesting_allowed_is_written() -> None:
    assert canonicalize(nested(DEPTH_MAX)) == b"[" * DEPTH_MAX + b"1" + b"]" * DEPTH_MAX


PARSE_REFUSED = [
    ("fraction", b'{"a":1.0}'),
    ("exponent", b'{"a":1e2}'),
    ("duplicate key", b'{"a":1,"a":1}'),
    ("NaN", b'{"a":NaN}'),
    ("above u64", b"18446744073709551616"),
    ("lone surrogate escape", b'"\\ud800"'),
    ("not JSON", b'{"a":'),
]


@pytest.mark.parametrize("what,text", PARSE_REFUSED, ids=[r[0] for r in PARSE_REFUSED])
def test_the_closed_parser_refuses_what_the_server_refuses(what: str, text: bytes) -> None:
    with pytest.raises(CanonicalError):
        parse_closed(text)


def test_the_closed_parser_reads_escapes_as_characters() -> None:
    assert parse_closed(b'{"a":"\\u003c\\ud83d\\ude00"}') == {"a": "<😀"}
