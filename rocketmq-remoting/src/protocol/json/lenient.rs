//! A tolerant JSON reader for what fastjson (and jsoncpp) write.
//!
//! Accepts, besides standard JSON: unquoted object keys (`{0:"a"}`, `{key:1}`), object or array
//! keys (`{{"topic":"T"}:5}`, turned into their compact JSON text), single-quoted strings,
//! trailing commas, and trailing whitespace. Produces a `serde_json::Value`, so typed bodies are
//! then read with `serde_json::from_value`. Nesting is limited to [`MAX_DEPTH`] so hostile input
//! cannot exhaust the stack.

use serde_json::{Map, Number, Value};

/// Maximum nesting of arrays and objects.
pub const MAX_DEPTH: usize = 128;

/// A syntax error with its byte position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset where the problem was found.
    pub position: usize,
    /// What was wrong.
    pub message: &'static str,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.message, self.position)
    }
}

impl std::error::Error for ParseError {}

/// Parses one JSON value from `input` (surrounding whitespace allowed).
pub fn parse(input: &[u8]) -> Result<Value, ParseError> {
    let mut p = Parser { s: input, pos: 0 };
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, message: &'static str) -> ParseError {
        ParseError {
            position: self.pos,
            message,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8, message: &'static str) -> Result<(), ParseError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(message))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(q @ (b'"' | b'\'')) => self.string(q).map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => {
                let word = self.bare_word();
                match word {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" => Ok(Value::Null),
                    _ => Err(self.err("unexpected character")),
                }
            }
        }
    }

    fn bare_word(&mut self) -> &str {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'-' | b'.' | b'+') {
                self.pos += 1;
            } else {
                break;
            }
        }
        // Only ASCII bytes were consumed.
        std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("")
    }

    fn object(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                None => return Err(self.err("unterminated object")),
                _ => {}
            }
            let key = match self.peek() {
                Some(q @ (b'"' | b'\'')) => self.string(q)?,
                Some(b'{' | b'[') => {
                    let v = self.value(depth + 1)?;
                    serde_json::to_string(&v).map_err(|_| self.err("bad object key"))?
                }
                _ => {
                    let w = self.bare_word();
                    if w.is_empty() {
                        return Err(self.err("expected object key"));
                    }
                    w.to_string()
                }
            };
            self.skip_ws();
            self.expect(b':', "expected ':' after object key")?;
            self.skip_ws();
            let v = self.value(depth + 1)?;
            map.insert(key, v);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.err("expected ',' or '}' in object")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(self.err("unterminated array")),
                _ => {}
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {}
                _ => return Err(self.err("expected ',' or ']' in array")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.pos;
        let word = self.bare_word();
        if let Ok(i) = word.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = word.parse::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        // fastjson may suffix longs with `L` and floats with `F`/`D`.
        let trimmed = word.trim_end_matches(['L', 'l', 'F', 'f', 'D', 'd']);
        if let Ok(i) = trimmed.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        match trimmed.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Ok(Value::Number(n)),
            None => {
                self.pos = start;
                Err(self.err("invalid number"))
            }
        }
    }

    fn string(&mut self, quote: u8) -> Result<String, ParseError> {
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let start = self.pos;
            while let Some(b) = self.peek() {
                if b == quote || b == b'\\' {
                    break;
                }
                self.pos += 1;
            }
            out.extend_from_slice(&self.s[start..self.pos]);
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b) if b == quote => {
                    self.pos += 1;
                    return Ok(String::from_utf8(out)
                        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()));
                }
                Some(_) => {
                    self.pos += 1;
                    let esc = self.peek().ok_or_else(|| self.err("unterminated escape"))?;
                    self.pos += 1;
                    let ch = match esc {
                        b'\'' => '\'',
                        b'v' => '\u{b}',
                        b'0' => '\0',
                        b'u' => self.unicode_escape()?,
                        b'x' => {
                            let hi = self.hex_digits(2)?;
                            char::from_u32(hi).unwrap_or('\u{fffd}')
                        }
                        other => super::escape::short_unescape(other)
                            .ok_or_else(|| self.err("invalid escape"))?,
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }

    fn hex_digits(&mut self, n: usize) -> Result<u32, ParseError> {
        let digits = self
            .s
            .get(self.pos..self.pos + n)
            .ok_or_else(|| self.err("truncated escape"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.err("invalid escape"))?;
        let v = u32::from_str_radix(text, 16).map_err(|_| self.err("invalid escape"))?;
        self.pos += n;
        Ok(v)
    }

    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        let first = self.hex_digits(4)?;
        if (0xD800..0xDC00).contains(&first)
            && self.s.get(self.pos..self.pos + 2) == Some(b"\\u".as_slice())
        {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex_digits(4)?;
            if (0xDC00..0xE000).contains(&second) {
                let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{fffd}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{fffd}'))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_fastjson_quirks() {
        let v =
            parse(br#"{"brokerAddrs":{0:"192.168.0.1:10911",1:"b"},'x':'y',"t":[1,2,],}"#).unwrap();
        assert_eq!(
            v,
            json!({"brokerAddrs":{"0":"192.168.0.1:10911","1":"b"},"x":"y","t":[1,2]})
        );
        let v =
            parse(br#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}"#).unwrap();
        assert_eq!(
            v,
            json!({"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":5}})
        );
        assert_eq!(
            parse(b" {\"a\":\"\\u00e9\\uD83D\\uDE00\"}\n").unwrap(),
            json!({"a":"é😀"})
        );
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        for bad in [
            &b"{"[..],
            b"{\"a\"",
            b"[1,",
            b"\"abc",
            b"{\"a\":tru}",
            b"\"\\u12\"",
            b"-",
            b"{:1}",
            b"[1] x",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let deep = "[".repeat(10_000);
        assert!(parse(deep.as_bytes()).is_err());
    }
}
