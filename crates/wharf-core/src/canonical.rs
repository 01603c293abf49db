//! Canonical JSON: RFC 8785 (JCS) restricted to integers, the legacy Go escaping, and a closed parser.
//!
//! This module owns the exact bytes that get signed and digested. It knows JSON text and
//! [`serde_json::Value`], nothing about envelopes, keys or schemas.
//!
//! - [`parse_closed`] reads JSON text strictly: RFC 8259 grammar, valid UTF-8, no duplicate object
//!   keys, no lone surrogates, integers only (a number with a fraction or an exponent is refused,
//!   even `1.0`, because it is detected on the raw text), integers within `i64::MIN..=u64::MAX`,
//!   nesting at most [`DEPTH_MAX`].
//! - [`to_canonical`] writes a value in the one canonical form: object keys sorted by UTF-16 code
//!   units, no whitespace, strings escaped per JCS (only `"`, `\` and control characters below
//!   U+0020; `\b \f \n \r \t` short forms, others `\u00xx` in lowercase hex), integers in plain
//!   decimal.
//! - [`to_canonical_legacy_go`] is identical except that it also escapes `<`, `>`, `&`, U+2028 and
//!   U+2029 as `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`, which is what Go's
//!   `encoding/json` emits by default. Only verification uses it (SPEC §3.2); nothing signs with it.
//!
//! `-0` is an integer and canonicalises to `0`, as in JCS.
//!
//! Why integers only: JCS serialises numbers through IEEE-754 doubles, and two implementations that
//! disagree on one float's shortest form disagree on a signature. Refusing fractions and exponents
//! removes that whole class of interop bugs. One deliberate difference from a float-based JCS
//! implementation remains: integers above 2^53 are written exactly here, while an ES6-style
//! implementation would round them. Producers that need cross-language agreement keep integers
//! within ±(2^53 − 1); the v1 schemas already do (appendix "S").

use serde_json::{Map, Number, Value};

/// Deepest nesting of arrays and objects accepted by [`parse_closed`] and written by
/// [`to_canonical`]. The envelope is 2 levels, the v1 payloads at most 3 more; 64 leaves room for
/// operator schemas while keeping the recursive parser's stack use small and fixed.
pub const DEPTH_MAX: usize = 64;

/// Why JSON text was refused or a value could not be written canonically.
///
/// Every variant is a property of the input: retrying the same bytes can never help. Offsets are
/// byte offsets into the input, for diagnostics; no variant carries input content, so an error can
/// be logged without leaking a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonicalError {
    /// The text is not JSON (RFC 8259 grammar), e.g. a missing comma, a trailing comma, a
    /// leading zero, a raw control character inside a string, or bytes after the value.
    #[error("malformed JSON at byte {offset}: expected {expected}")]
    Malformed {
        /// Where parsing stopped.
        offset: usize,
        /// What the grammar wanted there.
        expected: &'static str,
    },
    /// The text is not valid UTF-8.
    #[error("invalid UTF-8 at byte {offset}")]
    InvalidUtf8 {
        /// The first invalid byte.
        offset: usize,
    },
    /// A `\u` escape names half of a surrogate pair without its other half. Such a string has no
    /// Unicode value, so it has no canonical form.
    #[error("lone surrogate escape at byte {offset}")]
    LoneSurrogate {
        /// The start of the escape.
        offset: usize,
    },
    /// An object names the same key twice. Parsers disagree on which one wins, so a signature
    /// over such an object would mean different things to different readers.
    #[error("duplicate object key at byte {offset}")]
    DuplicateKey {
        /// The start of the second occurrence.
        offset: usize,
    },
    /// A number has a fraction or an exponent (`1.0`, `1e2`, `-0.5`). Only integers are canonical.
    #[error("number with a fraction or exponent at byte {offset}; only integers are accepted")]
    Float {
        /// The start of the number.
        offset: usize,
    },
    /// An integer is below `i64::MIN` or above `u64::MAX`.
    #[error("integer out of range at byte {offset}")]
    IntegerRange {
        /// The start of the number.
        offset: usize,
    },
    /// Arrays and objects nest deeper than [`DEPTH_MAX`].
    #[error("JSON nests deeper than {depth_max} levels at byte {offset}")]
    TooDeep {
        /// Where the level past the limit opened (0 when writing a value).
        offset: usize,
        /// The limit, [`DEPTH_MAX`].
        depth_max: usize,
    },
    /// A [`serde_json::Value`] handed to the writer holds a non-integer number. Values built by
    /// [`parse_closed`] never do; this catches values built in code.
    #[error("value holds a non-integer number; only integers are canonical")]
    FloatValue,
}

/// Which canonical form: what wharf signs, or what the reference Go producer signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// RFC 8785 restricted to integers. Signing always uses this.
    Rfc8785,
    /// RFC 8785 plus Go's HTML-safe escaping of `<`, `>`, `&`, U+2028, U+2029.
    LegacyGo,
}

impl Form {
    /// A stable name for logs and audit.
    pub const fn as_str(self) -> &'static str {
        match self {
            Form::Rfc8785 => "rfc8785",
            Form::LegacyGo => "legacy-go",
        }
    }
}

/// Parses JSON text strictly (see the module docs) into a value.
pub fn parse_closed(text: &[u8]) -> Result<Value, CanonicalError> {
    // Validate UTF-8 once up front, so the parser can slice strings without re-checking.
    let text = std::str::from_utf8(text).map_err(|e| CanonicalError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    p.skip_ws();
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(p.malformed("end of input"));
    }
    Ok(value)
}

/// Parses JSON text strictly and writes it in RFC 8785 form.
pub fn canonicalize(text: &[u8]) -> Result<Vec<u8>, CanonicalError> {
    to_canonical(&parse_closed(text)?)
}

/// Parses JSON text strictly and writes it in the legacy Go form.
pub fn canonicalize_legacy_go(text: &[u8]) -> Result<Vec<u8>, CanonicalError> {
    to_canonical_legacy_go(&parse_closed(text)?)
}

/// Writes a value in RFC 8785 form (integers only).
pub fn to_canonical(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    to_form(value, Form::Rfc8785)
}

/// Writes a value in the legacy Go form (RFC 8785 plus Go's HTML-safe escapes).
pub fn to_canonical_legacy_go(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    to_form(value, Form::LegacyGo)
}

/// Writes a value in the given form.
pub fn to_form(value: &Value, form: Form) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::new();
    write_value(&mut out, value, form)?;
    Ok(out)
}

/// Appends the canonical form of `value` to `out`. On error `out` holds a partial write.
pub fn write_value(out: &mut Vec<u8>, value: &Value, form: Form) -> Result<(), CanonicalError> {
    write_at(out, value, form, 0)
}

fn write_at(
    out: &mut Vec<u8>,
    value: &Value,
    form: Form,
    depth: usize,
) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n)?,
        Value::String(s) => write_string(out, s, form),
        Value::Array(items) => {
            let depth = enter(depth)?;
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_at(out, item, form, depth)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let depth = enter(depth)?;
            out.push(b'{');
            for (i, (key, item)) in sorted_entries(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key, form);
                out.push(b':');
                write_at(out, item, form, depth)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn enter(depth: usize) -> Result<usize, CanonicalError> {
    let depth = depth + 1;
    if depth > DEPTH_MAX {
        return Err(CanonicalError::TooDeep {
            offset: 0,
            depth_max: DEPTH_MAX,
        });
    }
    Ok(depth)
}

/// Object entries in JCS order: keys compared as sequences of UTF-16 code units. This differs
/// from UTF-8 byte order (and so from `serde_json::Map`'s own order) for keys mixing characters
/// above U+FFFF with characters in U+E000..=U+FFFF.
fn sorted_entries(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    entries
}

/// Compares two keys the way JCS orders them (UTF-16 code units).
pub fn cmp_keys(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Writes an integer number in plain decimal.
pub fn write_number(out: &mut Vec<u8>, n: &Number) -> Result<(), CanonicalError> {
    if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(u) = n.as_u64() {
        out.extend_from_slice(u.to_string().as_bytes());
    } else {
        return Err(CanonicalError::FloatValue);
    }
    Ok(())
}

/// Writes a string literal with the escaping of `form`.
pub fn write_string(out: &mut Vec<u8>, s: &str, form: Form) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\u{08}' => Some(b"\\b"),
            '\u{0c}' => Some(b"\\f"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            '<' if form == Form::LegacyGo => Some(b"\\u003c"),
            '>' if form == Form::LegacyGo => Some(b"\\u003e"),
            '&' if form == Form::LegacyGo => Some(b"\\u0026"),
            '\u{2028}' if form == Form::LegacyGo => Some(b"\\u2028"),
            '\u{2029}' if form == Form::LegacyGo => Some(b"\\u2029"),
            _ => None,
        };
        let control = (c as u32) < 0x20;
        if escape.is_none() && !control {
            continue;
        }
        out.extend_from_slice(&s.as_bytes()[run_start..i]);
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => {
                let b = c as u32 as u8;
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
        }
        run_start = i + c.len_utf8();
    }
    out.extend_from_slice(&s.as_bytes()[run_start..]);
    out.push(b'"');
}

/// A recursive-descent parser over validated UTF-8. Recursion is bounded by [`DEPTH_MAX`].
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn malformed(&self, expected: &'static str) -> CanonicalError {
        CanonicalError::Malformed {
            offset: self.pos,
            expected,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8, expected: &'static str) -> Result<(), CanonicalError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.malformed(expected))
        }
    }

    fn literal(&mut self, word: &'static str, value: Value) -> Result<Value, CanonicalError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.malformed(word))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, CanonicalError> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.malformed("a JSON value")),
        }
    }

    fn check_depth(&self, depth: usize) -> Result<(), CanonicalError> {
        if depth > DEPTH_MAX {
            return Err(CanonicalError::TooDeep {
                offset: self.pos,
                depth_max: DEPTH_MAX,
            });
        }
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<Value, CanonicalError> {
        self.check_depth(depth)?;
        self.pos += 1; // '{'
        let mut map = Map::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.malformed("an object key"));
            }
            let key_offset = self.pos;
            let key = self.string()?;
            if map.contains_key(&key) {
                return Err(CanonicalError::DuplicateKey { offset: key_offset });
            }
            self.skip_ws();
            self.expect(b':', "':'")?;
            self.skip_ws();
            let item = self.value(depth)?;
            map.insert(key, item);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.malformed("',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, CanonicalError> {
        self.check_depth(depth)?;
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.malformed("',' or ']'")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, CanonicalError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.malformed("no leading zero"));
                }
            }
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => return Err(self.malformed("a digit")),
        }
        let int_end = self.pos;
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.malformed("a digit after '.'"));
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.malformed("a digit in the exponent"));
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            float = true;
        }
        // The whole number is consumed first so that `1.0` is reported as a float, not as
        // "malformed at '.'": the refusal names the real reason.
        if float {
            return Err(CanonicalError::Float { offset: start });
        }
        let digits = &self.text[start..int_end];
        let number = if digits.starts_with('-') {
            digits.parse::<i64>().ok().map(Number::from)
        } else {
            digits.parse::<u64>().ok().map(Number::from)
        };
        number
            .map(Value::Number)
            .ok_or(CanonicalError::IntegerRange { offset: start })
    }

    fn hex4(&mut self) -> Result<u32, CanonicalError> {
        let Some(chunk) = self.bytes.get(self.pos..self.pos + 4) else {
            return Err(self.malformed("four hex digits"));
        };
        let mut v = 0u32;
        for &b in chunk {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(self.malformed("four hex digits")),
            };
            v = (v << 4) | u32::from(d);
        }
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, CanonicalError> {
        self.pos += 1; // '"'
        let mut out = String::new();
        let mut run_start = self.pos;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.malformed("'\"' closing the string"));
            };
            match b {
                b'"' => {
                    out.push_str(&self.text[run_start..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[run_start..self.pos]);
                    let escape_start = self.pos;
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.malformed("an escape"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape(escape_start)?),
                        _ => {
                            self.pos = escape_start;
                            return Err(self.malformed("a valid escape"));
                        }
                    }
                    run_start = self.pos;
                }
                0x00..=0x1f => return Err(self.malformed("no raw control character in a string")),
                _ => self.pos += 1,
            }
        }
    }

    /// Decodes the rest of a `\uXXXX` escape (and its low-surrogate partner, if any).
    fn unicode_escape(&mut self, escape_start: usize) -> Result<char, CanonicalError> {
        let lone = CanonicalError::LoneSurrogate {
            offset: escape_start,
        };
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.bytes[self.pos..].starts_with(b"\\u") {
                    return Err(lone);
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(lone);
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(lone),
            c => c,
        };
        char::from_u32(code).ok_or(lone)
    }
}

#[cfg(test)]
pub(crate) mod tests;
