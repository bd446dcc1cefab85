//! Evaluation with Java's types and rules (RocketMQ 4.9.8 `ComparisonExpression`,
//! `LogicExpression`, `UnaryExpression`), over message properties, which are strings.
//!
//! * Values are NULL, `Boolean`, `Integer`, `Long`, `Double` or `String`; a property is its
//!   string value, or NULL when missing.
//! * Three-valued logic: a comparison with NULL is NULL ("unknown"); `AND`/`OR`/`NOT`
//!   propagate NULL as SQL does; a message matches only when the result is TRUE.
//! * Values of different types are converted as `ComparisonExpression.__compare` does with
//!   `convertStringExpressions` on (always, in the broker): a string meeting a number is
//!   parsed as that number's type (`Integer.valueOf`, `Long.valueOf`: decimal digits of any
//!   script, as Java's `Character.digit`; `Double.valueOf`: ASCII only), a
//!   string meeting a boolean is `"true"` (any case) or false; `int` widens to `long` and
//!   numbers to `double`. A string that does not parse is an error, and an error makes the
//!   whole expression fail (the message does not match).
//! * `>`, `>=`, `<`, `<=` between two strings compare them as doubles (error otherwise).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use rocketmq_remoting::protocol::StringMap;

use super::parser::{CmpOp, Const, Expr};

/// Where an expression finds message properties by name.
pub trait Properties {
    /// The value of property `name`, if the message has it.
    fn property(&self, name: &str) -> Option<&str>;
}

impl Properties for StringMap {
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name)
    }
}

impl<S: std::hash::BuildHasher> Properties for HashMap<String, String, S> {
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

impl Properties for BTreeMap<String, String> {
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

impl Properties for [(&str, &str)] {
    fn property(&self, name: &str) -> Option<&str> {
        self.iter().rev().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }
}

/// Why an expression could not be evaluated for a message (Java throws, and the broker
/// counts the message as not matching).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EvalError {
    message: String,
}

impl EvalError {
    fn new(message: String) -> Self {
        EvalError { message }
    }
}

/// A runtime value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(&'a str),
}

impl<'a> Value<'a> {
    fn of(c: &'a Const) -> Self {
        match c {
            Const::Null => Value::Null,
            Const::Bool(b) => Value::Bool(*b),
            Const::Int(v) => Value::Int(*v),
            Const::Long(v) => Value::Long(*v),
            Const::Double(v) => Value::Double(*v),
            Const::Str(s) => Value::Str(s),
        }
    }
}

/// Java `Double.compare`: -0.0 < 0.0, NaN equal to itself and above everything.
fn double_cmp(a: f64, b: f64) -> Ordering {
    if a < b {
        return Ordering::Less;
    }
    if a > b {
        return Ordering::Greater;
    }
    let bits = |v: f64| {
        if v.is_nan() {
            0x7ff8_0000_0000_0000_i64
        } else {
            v.to_bits() as i64
        }
    };
    bits(a).cmp(&bits(b))
}

/// The first digit (zero) of each run of ten Unicode decimal digits (`Nd`) in the Basic
/// Multilingual Plane, ASCII first (Unicode 14; Java 8's Unicode 6.2 lacks U+0DE6 and U+A9F0).
const BMP_DIGIT_ZEROS: [u32; 37] = [
    0x0030, 0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6,
    0x0D66, 0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80,
    0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0,
    0xFF10,
];

/// Java `Character.digit(c, 10)` for one UTF-16 unit: the value of a decimal digit of the
/// BMP (a character outside it is two surrogates to Java, neither a digit).
fn java_decimal_digit(c: char) -> Option<u8> {
    let c = u32::from(c);
    let i = BMP_DIGIT_ZEROS
        .partition_point(|&z| z <= c)
        .checked_sub(1)?;
    let d = c - BMP_DIGIT_ZEROS[i];
    // `d < 10`, so it fits.
    (d < 10).then_some(d as u8)
}

/// The text Java's `Integer.parseInt` / `Long.parseLong` read, in ASCII: an optional ASCII
/// sign, then one or more decimal digits of any script (`Character.digit(c, 10)`), or `None`.
fn java_integer_text(s: &str) -> Option<String> {
    let (sign, digits) = match s.as_bytes().first() {
        Some(b'+' | b'-') => s.split_at(1),
        _ => ("", s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut ascii = String::with_capacity(sign.len() + digits.len());
    ascii.push_str(sign);
    for c in digits.chars() {
        ascii.push(char::from(b'0' + java_decimal_digit(c)?));
    }
    Some(ascii)
}

/// Java `Integer.valueOf(String)`: an optional sign and decimal digits of any script.
fn parse_int(s: &str) -> Result<i32, EvalError> {
    java_integer_text(s)
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| EvalError::new(format!("For input string: \"{s}\" (as an int)")))
}

/// Java `Long.valueOf(String)`: an optional sign and decimal digits of any script.
fn parse_long(s: &str) -> Result<i64, EvalError> {
    java_integer_text(s)
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| EvalError::new(format!("For input string: \"{s}\" (as a long)")))
}

/// Java `Double.valueOf(String)`: surrounding control characters and spaces are ignored, an
/// optional sign, `NaN`, `Infinity`, or a decimal number with an optional exponent and an
/// optional `f`/`F`/`d`/`D` suffix. (Java's hexadecimal floating-point form is not read.)
pub(crate) fn parse_double(s: &str) -> Result<f64, EvalError> {
    let fail = || EvalError::new(format!("For input string: \"{s}\" (as a double)"));
    let t = s.trim_matches(|c: char| c <= ' ');
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if body.starts_with(['+', '-']) {
        return Err(fail());
    }
    let v = match body {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        _ => {
            let body = match body.as_bytes().last() {
                Some(b'f' | b'F' | b'd' | b'D') => &body[..body.len() - 1],
                _ => body,
            };
            let digits_ok = body
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
            if !digits_ok || !body.bytes().any(|b| b.is_ascii_digit()) {
                return Err(fail());
            }
            body.parse::<f64>().map_err(|_| fail())?
        }
    };
    Ok(if neg { -v } else { v })
}

fn java_utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Java `ComparisonExpression.__compare(lv, rv, true)` for two non-NULL values: the order
/// after Java's conversions, `Less` where Java answers -1 for types it does not convert.
pub(crate) fn compare(l: Value<'_>, r: Value<'_>) -> Result<Ordering, EvalError> {
    use Value::*;
    Ok(match (l, r) {
        (Null, _) | (_, Null) => {
            return Err(EvalError::new("NULL cannot be compared".into()));
        }
        (Bool(a), Bool(b)) => a.cmp(&b),
        (Int(a), Int(b)) => a.cmp(&b),
        (Long(a), Long(b)) => a.cmp(&b),
        (Double(a), Double(b)) => double_cmp(a, b),
        (Str(a), Str(b)) => java_utf16_cmp(a, b),
        // Java casts the Boolean to String here and fails.
        (Bool(_), Str(s)) => {
            return Err(EvalError::new(format!(
                "a boolean cannot be compared with the string '{s}'"
            )))
        }
        (Bool(_), _) => Ordering::Less,
        (Int(a), Long(b)) => i64::from(a).cmp(&b),
        (Int(a), Double(b)) => double_cmp(f64::from(a), b),
        (Int(a), Str(b)) => a.cmp(&parse_int(b)?),
        (Long(a), Int(b)) => a.cmp(&i64::from(b)),
        (Long(a), Double(b)) => double_cmp(a as f64, b),
        (Long(a), Str(b)) => a.cmp(&parse_long(b)?),
        (Double(a), Int(b)) => double_cmp(a, f64::from(b)),
        (Double(a), Long(b)) => double_cmp(a, b as f64),
        (Double(a), Str(b)) => double_cmp(a, parse_double(b)?),
        (Int(_) | Long(_) | Double(_), Bool(_)) => Ordering::Less,
        (Str(a), Bool(b)) => a.eq_ignore_ascii_case("true").cmp(&b),
        (Str(a), Int(b)) => parse_int(a)?.cmp(&b),
        (Str(a), Long(b)) => parse_long(a)?.cmp(&b),
        (Str(a), Double(b)) => double_cmp(parse_double(a)?, b),
    })
}

/// [`compare`] for two constants (the `BETWEEN` bounds check at compile time).
pub(crate) fn compare_consts(l: &Const, r: &Const) -> Result<Ordering, EvalError> {
    compare(Value::of(l), Value::of(r))
}

fn as_bool(v: Value<'_>) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

/// Evaluates `e`: TRUE, FALSE or NULL for a boolean expression, any value otherwise.
pub(crate) fn eval<'a, P: Properties + ?Sized>(
    e: &'a Expr,
    props: &'a P,
) -> Result<Value<'a>, EvalError> {
    Ok(match e {
        Expr::Const(c) => Value::of(c),
        Expr::Prop(name) => props.property(name).map_or(Value::Null, Value::Str),
        Expr::Neg(inner) => match eval(inner, props)? {
            Value::Int(v) => Value::Int(v.wrapping_neg()),
            Value::Long(v) => Value::Long(v.wrapping_neg()),
            Value::Double(v) => Value::Double(-v),
            _ => Value::Null,
        },
        Expr::Not(inner) => match eval(inner, props)? {
            Value::Null => Value::Null,
            v => Value::Bool(!as_bool(v).unwrap_or(false)),
        },
        Expr::BoolCast(inner) => match eval(inner, props)? {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(b),
            _ => Value::Bool(false),
        },
        Expr::And(items) => {
            let mut unknown = false;
            for item in items {
                match eval(item, props)? {
                    Value::Bool(false) => return Ok(Value::Bool(false)),
                    Value::Bool(true) => {}
                    _ => unknown = true,
                }
            }
            if unknown {
                Value::Null
            } else {
                Value::Bool(true)
            }
        }
        Expr::Or(items) => {
            let mut unknown = false;
            for item in items {
                match eval(item, props)? {
                    Value::Bool(true) => return Ok(Value::Bool(true)),
                    Value::Bool(false) => {}
                    _ => unknown = true,
                }
            }
            if unknown {
                Value::Null
            } else {
                Value::Bool(false)
            }
        }
        Expr::Cmp(op, l, r) => {
            let lv = eval(l, props)?;
            if lv == Value::Null {
                return Ok(Value::Null);
            }
            let rv = eval(r, props)?;
            if rv == Value::Null {
                return Ok(Value::Null);
            }
            let order = match (lv, rv) {
                (Value::Str(a), Value::Str(b)) => {
                    let both = parse_double(a).and_then(|a| Ok((a, parse_double(b)?)));
                    let (a, b) = both.map_err(|_| {
                        EvalError::new(format!(
                            "It's illegal to compare string by '>=', '>', '<', '<='. lv={a}, rv={b}"
                        ))
                    })?;
                    double_cmp(a, b)
                }
                (a, b) => compare(a, b)?,
            };
            Value::Bool(match op {
                CmpOp::Gt => order.is_gt(),
                CmpOp::Ge => order.is_ge(),
                CmpOp::Lt => order.is_lt(),
                CmpOp::Le => order.is_le(),
            })
        }
        Expr::Eq(l, r) => {
            let lv = eval(l, props)?;
            let rv = eval(r, props)?;
            match (lv, rv) {
                (Value::Null, Value::Null) => Value::Bool(true),
                (Value::Null, _) => Value::Null,
                (_, Value::Null) => Value::Bool(false),
                (a, b) => Value::Bool(compare(a, b)?.is_eq()),
            }
        }
        Expr::In { prop, list, not } => match props.property(prop) {
            None => Value::Null,
            Some(v) => Value::Bool(list.iter().any(|s| &**s == v) != *not),
        },
    })
}
