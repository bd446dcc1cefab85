//! A recursive-descent parser for Java's `SelectorParser.jj` grammar, with the checks Java's
//! expression factories (`ComparisonExpression.createXxx`, `asBooleanExpression`,
//! `ConstantExpression.createFromDecimal`/`createFloat`) make while building the tree.
//!
//! ```text
//! selector   := or
//! or         := and ( OR and )*
//! and        := equality ( AND equality )*
//! equality   := comparison ( "=" comparison | "<>" comparison | IS NULL | IS NOT NULL )*
//! comparison := unary ( (">"|">="|"<"|"<=") unary
//!                     | [NOT] BETWEEN unary AND unary
//!                     | [NOT] IN "(" string ( "," string )* ")" )*
//! unary      := "+" unary | "-" unary | NOT unary | primary
//! primary    := literal | ID | "(" or ")"
//! ```
//!
//! As Java's generated parser, it stops after the selector without requiring the end of the
//! input: text after a complete expression is ignored (only its first token is read, and must
//! be a token).

use std::collections::VecDeque;
use std::fmt;

use super::lexer::{Lexer, Tok};
use super::FilterError;

/// A constant of the expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Const {
    /// `NULL`.
    Null,
    /// `TRUE` / `FALSE`.
    Bool(bool),
    /// A decimal literal in `int` range (Java `Integer`).
    Int(i32),
    /// A decimal literal beyond `int` (Java `Long`).
    Long(i64),
    /// A floating-point literal (Java `Double`).
    Double(f64),
    /// A string literal.
    Str(Box<str>),
}

/// The comparison operators that order their operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl CmpOp {
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
        }
    }
}

/// A compiled expression (the shapes of Java's expression classes).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Const(Const),
    /// A message property.
    Prop(Box<str>),
    /// `- x` (Java `UnaryExpression.createNegate`).
    Neg(Box<Expr>),
    /// `NOT x`.
    Not(Box<Expr>),
    /// A property used as a condition (Java `createBooleanCast`).
    BoolCast(Box<Expr>),
    /// `a AND b AND ...`, evaluated left to right as Java's left-nested `LogicExpression`s.
    And(Vec<Expr>),
    /// `a OR b OR ...`, likewise.
    Or(Vec<Expr>),
    /// `>`, `>=`, `<`, `<=`.
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// `=` (and `IS NULL`, which is `= NULL` without the operand checks).
    Eq(Box<Expr>, Box<Expr>),
    /// `prop [NOT] IN ('a', 'b')`.
    In {
        prop: Box<str>,
        list: Vec<Box<str>>,
        not: bool,
    },
}

impl Expr {
    /// Whether Java's class for this node implements `BooleanExpression`.
    fn is_boolean(&self) -> bool {
        match self {
            Expr::Const(c) => matches!(c, Const::Null | Const::Bool(_)),
            Expr::Prop(_) | Expr::Neg(_) => false,
            _ => true,
        }
    }
}

impl fmt::Display for Const {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Const::Null => f.write_str("NULL"),
            Const::Bool(true) => f.write_str("TRUE"),
            Const::Bool(false) => f.write_str("FALSE"),
            Const::Int(v) => write!(f, "{v}"),
            Const::Long(v) => write!(f, "{v}"),
            Const::Double(v) => write!(f, "{v:?}"),
            Const::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, items: &[Expr], op: &str| {
            f.write_str("(")?;
            for (i, e) in items.iter().enumerate() {
                if i > 0 {
                    write!(f, " {op} ")?;
                }
                write!(f, "{e}")?;
            }
            f.write_str(")")
        };
        match self {
            Expr::Const(c) => write!(f, "{c}"),
            Expr::Prop(p) => f.write_str(p),
            Expr::Neg(e) => write!(f, "(- {e})"),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::BoolCast(e) => write!(f, "{e}"),
            Expr::And(items) => join(f, items, "AND"),
            Expr::Or(items) => join(f, items, "OR"),
            Expr::Cmp(op, l, r) => write!(f, "({l} {} {r})", op.symbol()),
            Expr::Eq(l, r) => write!(f, "({l} = {r})"),
            Expr::In { prop, list, not } => {
                write!(f, "{prop} {}IN (", if *not { "NOT " } else { "" })?;
                for (i, s) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "'{}'", s.replace('\'', "''"))?;
                }
                f.write_str(")")
            }
        }
    }
}

fn invalid(message: String) -> FilterError {
    FilterError::Invalid { message }
}

/// Java `asBooleanExpression`: a boolean expression as is, a property as a boolean cast.
fn as_boolean(e: Expr) -> Result<Expr, FilterError> {
    match e {
        Expr::Prop(_) => Ok(Expr::BoolCast(Box::new(e))),
        e if e.is_boolean() => Ok(e),
        e => Err(invalid(format!(
            "Expression will not result in a boolean value: {e}"
        ))),
    }
}

/// Java `ComparisonExpression.checkLessThanOperand`.
fn check_less_than_operand(e: &Expr) -> Result<(), FilterError> {
    let ok = match e {
        Expr::Const(c) => matches!(c, Const::Int(_) | Const::Long(_) | Const::Double(_)),
        e => !e.is_boolean(),
    };
    if ok {
        Ok(())
    } else {
        Err(invalid(format!("Value '{e}' cannot be compared.")))
    }
}

fn ordered(op: CmpOp, l: Expr, r: Expr) -> Result<Expr, FilterError> {
    check_less_than_operand(&l)?;
    check_less_than_operand(&r)?;
    Ok(Expr::Cmp(op, Box::new(l), Box::new(r)))
}

/// Java `ComparisonExpression.createEqual`.
fn equal(l: Expr, r: Expr) -> Result<Expr, FilterError> {
    for e in [&l, &r] {
        if matches!(e, Expr::Const(Const::Null)) {
            return Err(invalid(format!("'{e}' cannot be compared.")));
        }
    }
    if let (Expr::Const(_), Expr::Const(_)) = (&l, &r) {
        if l.is_boolean() && !r.is_boolean() {
            return Err(invalid(format!("'{l}' cannot be compared with '{r}'")));
        }
    }
    Ok(Expr::Eq(Box::new(l), Box::new(r)))
}

/// Java `ComparisonExpression.createBetween`.
fn between(value: Expr, low: Expr, high: Expr) -> Result<Expr, FilterError> {
    if let (Expr::Const(lv), Expr::Const(hv)) = (&low, &high) {
        if *lv == Const::Null || *hv == Const::Null {
            return Err(invalid(
                "Illegal values of between, values can not be null!".into(),
            ));
        }
        let order = super::eval::compare_consts(hv, lv).map_err(|e| invalid(e.to_string()))?;
        if order.is_lt() {
            return Err(invalid(format!(
                "Illegal values of between, left value({lv}) must less than or equal to right value({hv})"
            )));
        }
    }
    let ge = ordered(CmpOp::Ge, value.clone(), low)?;
    let le = ordered(CmpOp::Le, value, high)?;
    Ok(Expr::And(vec![ge, le]))
}

/// Java `ComparisonExpression.createNotBetween`.
fn not_between(value: Expr, low: Expr, high: Expr) -> Result<Expr, FilterError> {
    let lt = ordered(CmpOp::Lt, value.clone(), low)?;
    let gt = ordered(CmpOp::Gt, value, high)?;
    Ok(Expr::Or(vec![lt, gt]))
}

/// Java `ConstantExpression.createFromDecimal`.
fn decimal(text: &str) -> Result<Const, FilterError> {
    let digits = text.trim_end_matches(['l', 'L']);
    let v: i64 = digits
        .parse()
        .map_err(|_| invalid(format!("the number {text} is out of the range of a long")))?;
    Ok(match i32::try_from(v) {
        Ok(i) => Const::Int(i),
        Err(_) => Const::Long(v),
    })
}

/// Java `ConstantExpression.createFloat`: a literal that reads as infinity or as less than
/// `Double.MIN_VALUE` (so also every zero, such as `0.0`) is refused.
fn float(text: &str) -> Result<Const, FilterError> {
    let v: f64 = text
        .parse()
        .map_err(|_| invalid(format!("bad floating-point number {text}")))?;
    if v > f64::MAX {
        return Err(invalid(format!(
            "{text} is greater than 1.7976931348623157E308"
        )));
    }
    if v < f64::from_bits(1) {
        return Err(invalid(format!("{text} is less than 4.9E-324")));
    }
    Ok(Const::Double(v))
}

pub(crate) struct Parser<'a> {
    lexer: Lexer<'a>,
    ahead: VecDeque<(Tok<'a>, usize)>,
    depth: usize,
    max_depth: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str, max_depth: usize) -> Self {
        Parser {
            lexer: Lexer::new(src),
            ahead: VecDeque::with_capacity(2),
            depth: 0,
            max_depth,
        }
    }

    fn fill(&mut self, n: usize) -> Result<(), FilterError> {
        while self.ahead.len() < n {
            let t = self.lexer.next_token()?;
            self.ahead.push_back(t);
        }
        Ok(())
    }

    /// The `n`th token ahead (0: the next one).
    fn peek_at(&mut self, n: usize) -> Result<&Tok<'a>, FilterError> {
        self.fill(n + 1)?;
        Ok(&self.ahead[n].0)
    }

    fn peek(&mut self) -> Result<&Tok<'a>, FilterError> {
        self.peek_at(0)
    }

    fn bump(&mut self) -> Result<(Tok<'a>, usize), FilterError> {
        self.fill(1)?;
        Ok(self.ahead.pop_front().unwrap_or((Tok::Eof, 0)))
    }

    fn expect(&mut self, want: Tok<'static>) -> Result<(), FilterError> {
        let (t, pos) = self.bump()?;
        if t == want {
            Ok(())
        } else {
            Err(FilterError::Syntax {
                pos,
                message: format!("expected {} but found {}", want.describe(), t.describe()),
            })
        }
    }

    fn unexpected(t: Tok<'_>, pos: usize) -> FilterError {
        FilterError::Syntax {
            pos,
            message: format!("unexpected {}", t.describe()),
        }
    }

    fn enter(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(FilterError::TooDeep {
                max: self.max_depth,
            });
        }
        Ok(())
    }

    /// The selector; returns it and the position of ignored trailing text, if any.
    pub(crate) fn selector(mut self) -> Result<(Expr, Option<usize>), FilterError> {
        let e = self.or_expr()?;
        let e = as_boolean(e)?;
        self.fill(1)?;
        let trailing = match &self.ahead[0] {
            (Tok::Eof, _) => None,
            (_, pos) => Some(*pos),
        };
        Ok((e, trailing))
    }

    fn or_expr(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.and_expr()?;
        while *self.peek()? == Tok::Or {
            self.bump()?;
            let right = as_boolean(self.and_expr()?)?;
            left = match as_boolean(left)? {
                Expr::Or(mut items) => {
                    items.push(right);
                    Expr::Or(items)
                }
                l => Expr::Or(vec![l, right]),
            };
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.equality_expr()?;
        while *self.peek()? == Tok::And {
            self.bump()?;
            let right = as_boolean(self.equality_expr()?)?;
            left = match as_boolean(left)? {
                Expr::And(mut items) => {
                    items.push(right);
                    Expr::And(items)
                }
                l => Expr::And(vec![l, right]),
            };
        }
        Ok(left)
    }

    fn equality_expr(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.comparison_expr()?;
        loop {
            match self.peek()? {
                Tok::Eq => {
                    self.bump()?;
                    let right = self.comparison_expr()?;
                    left = equal(left, right)?;
                }
                Tok::Ne => {
                    self.bump()?;
                    let right = self.comparison_expr()?;
                    left = Expr::Not(Box::new(equal(left, right)?));
                }
                Tok::Is => {
                    self.bump()?;
                    let not = *self.peek()? == Tok::Not;
                    if not {
                        self.bump()?;
                    }
                    self.expect(Tok::Null)?;
                    let is_null = Expr::Eq(Box::new(left), Box::new(Expr::Const(Const::Null)));
                    left = if not {
                        Expr::Not(Box::new(is_null))
                    } else {
                        is_null
                    };
                }
                _ => return Ok(left),
            }
        }
    }

    fn string_list(&mut self) -> Result<Vec<Box<str>>, FilterError> {
        self.expect(Tok::LParen)?;
        let mut list = Vec::new();
        loop {
            match self.bump()? {
                (Tok::Str(s), _) => list.push(s.into_boxed_str()),
                (t, pos) => {
                    return Err(FilterError::Syntax {
                        pos,
                        message: format!("expected a string literal but found {}", t.describe()),
                    })
                }
            }
            match self.bump()? {
                (Tok::Comma, _) => continue,
                (Tok::RParen, _) => return Ok(list),
                (t, pos) => return Err(Self::unexpected(t, pos)),
            }
        }
    }

    fn in_list(&mut self, left: Expr, not: bool) -> Result<Expr, FilterError> {
        let list = self.string_list()?;
        match left {
            Expr::Prop(prop) => Ok(Expr::In { prop, list, not }),
            other => Err(invalid(format!(
                "Expected a property for In expression, got: {other}"
            ))),
        }
    }

    fn comparison_expr(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.unary_expr()?;
        loop {
            let op = match self.peek()? {
                Tok::Gt => Some(CmpOp::Gt),
                Tok::Ge => Some(CmpOp::Ge),
                Tok::Lt => Some(CmpOp::Lt),
                Tok::Le => Some(CmpOp::Le),
                _ => None,
            };
            if let Some(op) = op {
                self.bump()?;
                let right = self.unary_expr()?;
                left = ordered(op, left, right)?;
                continue;
            }
            match self.peek()?.clone() {
                Tok::Between => {
                    self.bump()?;
                    let low = self.unary_expr()?;
                    self.expect(Tok::And)?;
                    let high = self.unary_expr()?;
                    left = between(left, low, high)?;
                }
                Tok::In => {
                    self.bump()?;
                    left = self.in_list(left, false)?;
                }
                Tok::Not => {
                    // Java enters this loop on NOT and then needs NOT BETWEEN or NOT IN.
                    self.bump()?;
                    match self.bump()? {
                        (Tok::Between, _) => {
                            let low = self.unary_expr()?;
                            self.expect(Tok::And)?;
                            let high = self.unary_expr()?;
                            left = not_between(left, low, high)?;
                        }
                        (Tok::In, _) => left = self.in_list(left, true)?,
                        (t, pos) => {
                            return Err(FilterError::Syntax {
                                pos,
                                message: format!(
                                    "expected BETWEEN or IN after NOT but found {}",
                                    t.describe()
                                ),
                            })
                        }
                    }
                }
                _ => return Ok(left),
            }
        }
    }

    fn unary_expr(&mut self) -> Result<Expr, FilterError> {
        let prefix = self.peek()?.clone();
        if !matches!(prefix, Tok::Plus | Tok::Minus | Tok::Not) {
            return self.primary_expr();
        }
        self.enter()?;
        self.bump()?;
        let operand = self.unary_expr()?;
        let e = match prefix {
            Tok::Minus => Expr::Neg(Box::new(operand)),
            Tok::Not => Expr::Not(Box::new(as_boolean(operand)?)),
            _ => operand,
        };
        self.depth -= 1;
        Ok(e)
    }

    fn primary_expr(&mut self) -> Result<Expr, FilterError> {
        let (t, pos) = self.bump()?;
        Ok(match t {
            Tok::Str(s) => Expr::Const(Const::Str(s.into_boxed_str())),
            Tok::Decimal(text) => Expr::Const(decimal(text)?),
            Tok::Float(text) => Expr::Const(float(text)?),
            Tok::True => Expr::Const(Const::Bool(true)),
            Tok::False => Expr::Const(Const::Bool(false)),
            Tok::Null => Expr::Const(Const::Null),
            Tok::Id(name) => Expr::Prop(name.into()),
            Tok::LParen => {
                self.enter()?;
                let e = self.or_expr()?;
                self.expect(Tok::RParen)?;
                self.depth -= 1;
                e
            }
            t => return Err(Self::unexpected(t, pos)),
        })
    }
}
