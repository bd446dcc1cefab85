//! Tokens of Java's `SelectorParser.jj` (RocketMQ 4.9.8), produced on demand.
//!
//! The rules, as JavaCC applies them (longest match; on equal length the earlier token wins,
//! so keywords beat identifiers):
//! * white space: space, tab, `\n`, `\r`, form feed;
//! * comments: `-- ... <newline>` (a `--` with no newline after it is two minus signs) and
//!   `/* ... */`;
//! * keywords, any case: `NOT AND OR BETWEEN IN TRUE FALSE NULL IS`;
//! * `DECIMAL_LITERAL`: `0`, or a digit 1-9 then digits, optionally `l`/`L`;
//! * `FLOATING_POINT_LITERAL`: `5.5`, `5.`, `5.5E10`, `.5`, `.5E-3`, `5E10` (exponent `e`/`E`,
//!   optional sign);
//! * `STRING_LITERAL`: `'...'` with `''` for a quote (may span lines);
//! * `ID`: an ASCII letter, `_` or `$`, then letters, digits, `_`, `$`;
//! * operators `= <> > >= < <= ( , ) + -`. Anything else is a lexical error.

use super::FilterError;

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok<'a> {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    /// The text of a `DECIMAL_LITERAL` (suffix included).
    Decimal(&'a str),
    /// The text of a `FLOATING_POINT_LITERAL`.
    Float(&'a str),
    /// A string literal, decoded (`''` is one quote).
    Str(String),
    /// An identifier: a property name.
    Id(&'a str),
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    /// End of the input.
    Eof,
}

impl Tok<'_> {
    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Not => "NOT".into(),
            Tok::And => "AND".into(),
            Tok::Or => "OR".into(),
            Tok::Between => "BETWEEN".into(),
            Tok::In => "IN".into(),
            Tok::True => "TRUE".into(),
            Tok::False => "FALSE".into(),
            Tok::Null => "NULL".into(),
            Tok::Is => "IS".into(),
            Tok::Decimal(t) | Tok::Float(t) | Tok::Id(t) => format!("\"{t}\""),
            Tok::Str(s) => format!("'{}'", s.replace('\'', "''")),
            Tok::Eq => "\"=\"".into(),
            Tok::Ne => "\"<>\"".into(),
            Tok::Gt => "\">\"".into(),
            Tok::Ge => "\">=\"".into(),
            Tok::Lt => "\"<\"".into(),
            Tok::Le => "\"<=\"".into(),
            Tok::LParen => "\"(\"".into(),
            Tok::RParen => "\")\"".into(),
            Tok::Comma => "\",\"".into(),
            Tok::Plus => "\"+\"".into(),
            Tok::Minus => "\"-\"".into(),
            Tok::Eof => "the end of the expression".into(),
        }
    }
}

/// Reads tokens from an expression, one at a time.
pub(crate) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

const KEYWORDS: [(&str, Tok<'static>); 9] = [
    ("NOT", Tok::Not),
    ("AND", Tok::And),
    ("OR", Tok::Or),
    ("BETWEEN", Tok::Between),
    ("IN", Tok::In),
    ("TRUE", Tok::True),
    ("FALSE", Tok::False),
    ("NULL", Tok::Null),
    ("IS", Tok::Is),
];

fn is_id_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

fn is_id_part(b: u8) -> bool {
    is_id_start(b) || b.is_ascii_digit()
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Lexer { src, pos: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    fn at(&self, i: usize) -> Option<u8> {
        self.bytes().get(i).copied()
    }

    /// Skips white space and complete comments.
    fn skip_trivia(&mut self) -> Result<(), FilterError> {
        loop {
            match self.at(self.pos) {
                Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c') => self.pos += 1,
                Some(b'-') if self.at(self.pos + 1) == Some(b'-') => {
                    // A line comment needs its line end; without one, JavaCC's longest match
                    // is the single `-`.
                    let rest = &self.bytes()[self.pos + 2..];
                    match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                        Some(i) => self.pos += 2 + i + 1,
                        None => return Ok(()),
                    }
                }
                Some(b'/') if self.at(self.pos + 1) == Some(b'*') => {
                    let rest = &self.src[self.pos + 2..];
                    match rest.find("*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        None => {
                            return Err(FilterError::Lexical {
                                pos: self.pos,
                                message: "unterminated comment".into(),
                            })
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// The next token and where it starts (a byte offset).
    pub(crate) fn next_token(&mut self) -> Result<(Tok<'a>, usize), FilterError> {
        self.skip_trivia()?;
        let start = self.pos;
        let Some(b) = self.at(start) else {
            return Ok((Tok::Eof, start));
        };
        let one = |l: &mut Self, t: Tok<'a>, n: usize| {
            l.pos += n;
            Ok((t, start))
        };
        match b {
            b'=' => one(self, Tok::Eq, 1),
            b'<' => match self.at(start + 1) {
                Some(b'>') => one(self, Tok::Ne, 2),
                Some(b'=') => one(self, Tok::Le, 2),
                _ => one(self, Tok::Lt, 1),
            },
            b'>' => match self.at(start + 1) {
                Some(b'=') => one(self, Tok::Ge, 2),
                _ => one(self, Tok::Gt, 1),
            },
            b'(' => one(self, Tok::LParen, 1),
            b')' => one(self, Tok::RParen, 1),
            b',' => one(self, Tok::Comma, 1),
            b'+' => one(self, Tok::Plus, 1),
            b'-' => one(self, Tok::Minus, 1),
            b'\'' => self.string(start),
            b'0'..=b'9' | b'.' => self.number(start),
            b if is_id_start(b) => {
                let mut end = start + 1;
                while self.at(end).is_some_and(is_id_part) {
                    end += 1;
                }
                self.pos = end;
                let text = &self.src[start..end];
                let tok = KEYWORDS
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(text))
                    .map_or(Tok::Id(text), |(_, t)| t.clone());
                Ok((tok, start))
            }
            _ => {
                let c = self.src[start..].chars().next().unwrap_or('?');
                Err(FilterError::Lexical {
                    pos: start,
                    message: format!("unexpected character {c:?}"),
                })
            }
        }
    }

    fn string(&mut self, start: usize) -> Result<(Tok<'a>, usize), FilterError> {
        let mut out = String::new();
        let mut i = start + 1;
        loop {
            let rest = &self.src[i..];
            let Some(q) = rest.find('\'') else {
                return Err(FilterError::Lexical {
                    pos: start,
                    message: "unterminated string literal".into(),
                });
            };
            out.push_str(&rest[..q]);
            i += q + 1;
            if self.at(i) == Some(b'\'') {
                out.push('\'');
                i += 1;
            } else {
                self.pos = i;
                return Ok((Tok::Str(out), start));
            }
        }
    }

    fn digits(&self, mut i: usize) -> usize {
        while self.at(i).is_some_and(|b| b.is_ascii_digit()) {
            i += 1;
        }
        i
    }

    /// The end of an exponent (`E`, optional sign, digits) starting at `i`, if there is one.
    fn exponent(&self, i: usize) -> Option<usize> {
        if !matches!(self.at(i), Some(b'e' | b'E')) {
            return None;
        }
        let mut j = i + 1;
        if matches!(self.at(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let end = self.digits(j);
        (end > j).then_some(end)
    }

    fn number(&mut self, start: usize) -> Result<(Tok<'a>, usize), FilterError> {
        let int_end = self.digits(start);
        // The longest floating-point match, if any.
        let float_end = if self.at(int_end) == Some(b'.') {
            let frac_end = self.digits(int_end + 1);
            if int_end == start && frac_end == int_end + 1 {
                None // a lone "."
            } else {
                Some(self.exponent(frac_end).unwrap_or(frac_end))
            }
        } else if int_end > start {
            self.exponent(int_end)
        } else {
            None
        };
        if let Some(end) = float_end {
            self.pos = end;
            return Ok((Tok::Float(&self.src[start..end]), start));
        }
        if int_end == start {
            return Err(FilterError::Lexical {
                pos: start,
                message: "unexpected character '.'".into(),
            });
        }
        // DECIMAL_LITERAL: "0" alone, or 1-9 digits* with an optional l/L.
        let end = if self.at(start) == Some(b'0') {
            start + 1
        } else if matches!(self.at(int_end), Some(b'l' | b'L')) {
            int_end + 1
        } else {
            int_end
        };
        self.pos = end;
        Ok((Tok::Decimal(&self.src[start..end]), start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: &str) -> Result<Vec<Tok<'_>>, FilterError> {
        let mut l = Lexer::new(s);
        let mut out = Vec::new();
        loop {
            let (t, _) = l.next_token()?;
            if t == Tok::Eof {
                return Ok(out);
            }
            out.push(t);
        }
    }

    #[test]
    fn tokens_as_javacc_reads_them() {
        use Tok::*;
        assert_eq!(
            all("a>=1 AnD b<>'x''y' or c<=2.5e3").unwrap(),
            vec![
                Id("a"),
                Ge,
                Decimal("1"),
                And,
                Id("b"),
                Ne,
                Str("x'y".into()),
                Or,
                Id("c"),
                Le,
                Float("2.5e3")
            ]
        );
        assert_eq!(all("0123").unwrap(), vec![Decimal("0"), Decimal("123")]);
        assert_eq!(all("0L").unwrap(), vec![Decimal("0"), Id("L")]);
        assert_eq!(all("12l").unwrap(), vec![Decimal("12l")]);
        assert_eq!(all("5. .5 5E10 5.E-1").unwrap().len(), 4);
        assert_eq!(all("1e").unwrap(), vec![Decimal("1"), Id("e")]);
        assert_eq!(all("nulls NULL").unwrap(), vec![Id("nulls"), Null]);
        assert_eq!(all("$a_1").unwrap(), vec![Id("$a_1")]);
        assert_eq!(all("=>").unwrap(), vec![Eq, Gt]);
        // Comments.
        assert_eq!(
            all("a -- note\n= 1").unwrap(),
            vec![Id("a"), Eq, Decimal("1")]
        );
        assert_eq!(
            all("a -- note").unwrap(),
            vec![Id("a"), Minus, Minus, Id("note")]
        );
        assert_eq!(
            all("a /* x * y */ = 1").unwrap(),
            vec![Id("a"), Eq, Decimal("1")]
        );
        assert!(all("a /* x").is_err());
        // Not tokens of this grammar.
        for bad in ["a != 1", "a.b", "'open", ".", "a = \"x\"", "é", "a * 2"] {
            assert!(all(bad).is_err(), "{bad}");
        }
    }
}
