"""Canonical JSON: RFC 8785 (JCS) restricted to integers, and the legacy Go escaping form.

This module owns the exact bytes that are signed and digested (docs/protocol.md §2). It knows
JSON values as Python builds them (dict, list, str, int, bool, None) and nothing about
envelopes or keys.

- Object members are sorted by their keys' UTF-16 code units (sorting the UTF-16-BE encodings
  gives exactly that order).
- Strings escape only ``"``, ``\\`` and characters below U+0020 (``\\b \\f \\n \\r \\t`` short
  forms, others ``\\u00xx`` in lowercase hex); everything else is written as UTF-8.
- Only integers: a ``float`` anywhere is refused, even ``1.0``, because two writers that
  disagree on one double's shortest form disagree on a signature.
- ``legacy_go=True`` also escapes ``<``, ``>``, ``&``, U+2028 and U+2029 as Go's
  ``encoding/json`` does. Verification accepts that form; signing never emits it.
"""

from __future__ import annotations

from typing import Any

#: Deepest nesting of arrays and objects (the server refuses deeper ones).
DEPTH_MAX = 64
#: The integer range the server's parser accepts: i64 minimum to u64 maximum.
INTEGER_MIN = -(2**63)
INTEGER_MAX = 2**64 - 1

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LEGACY = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


class CanonicalError(ValueError):
    """A value has no canonical form (a float, a lone surrogate, a non-string key, an integer
    out of range, too deep, or a type JSON does not have). Retrying never helps."""


def _string(s: str, legacy_go: bool, out: list[str]) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CanonicalError("string holds a lone surrogate; it has no UTF-8 form") from e
    out.append('"')
    for ch in s:
        escaped = _SHORT.get(ch)
        if escaped is None and legacy_go:
            escaped = _LEGACY.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')


def _utf16_key(key: str) -> bytes:
    # surrogatepass only matters for keys with lone surrogates, which _string refuses anyway.
    return key.encode("utf-16-be", "surrogatepass")


def _value(v: Any, legacy_go: bool, depth: int, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, int):
        if not INTEGER_MIN <= v <= INTEGER_MAX:
            raise CanonicalError(f"integer {v} is outside {INTEGER_MIN}..{INTEGER_MAX}")
        out.append(str(int(v)))
    elif isinstance(v, float):
        raise CanonicalError("a number with a fraction or exponent has no canonical form; use integers")
    elif isinstance(v, str):
        _string(v, legacy_go, out)
    elif isinstance(v, (list, tuple)):
        if depth >= DEPTH_MAX:
            raise CanonicalError(f"JSON nests deeper than {DEPTH_MAX} levels")
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _value(item, legacy_go, depth + 1, out)
        out.append("]")
    elif isinstance(v, dict):
        if depth >= DEPTH_MAX:
            raise CanonicalError(f"JSON nests deeper than {DEPTH_MAX} levels")
        if not all(isinstance(k, str) for k in v):
            raise CanonicalError("object keys must be strings")
        out.append("{")
        for i, key in enumerate(sorted(v, key=_utf16_key)):
            if i:
                out.append(",")
            _string(key, legacy_go, out)
            out.append(":")
            _value(v[key], legacy_go, depth + 1, out)
        out.append("}")
    else:
        raise CanonicalError(f"{type(v).__name__} is not a JSON value")


def canonicalize(value: Any, *, legacy_go: bool = False) -> bytes:
    """The canonical JSON of ``value`` as UTF-8 bytes (RFC 8785, or the legacy Go form)."""
    out: list[str] = []
    _value(value, legacy_go, 0, out)
    return "".join(out).encode("utf-8")


def _refuse_constant(name: str) -> Any:
    raise CanonicalError(f"{name} is not JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CanonicalError(f"duplicate object key {key[:64]!r}")
        out[key] = value
    return out


def _refuse_float(text: str) -> Any:
    raise CanonicalError(f"number {text[:32]} has a fraction or exponent; only integers are accepted")


def parse_closed(text: str | bytes) -> Any:
    """Parses JSON text as strictly as the server does: no duplicate keys, no floats, no NaN or
    Infinity, integers in range. Lone surrogate escapes are caught when the value is written."""
    import json

    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_float=_refuse_float,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as e:
        raise CanonicalError(f"malformed JSON: {e}") from e
    canonicalize(value)  # ranges, depth, surrogates
    return value
