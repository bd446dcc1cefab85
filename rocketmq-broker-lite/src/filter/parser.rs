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

#[cfg(test)]
impl Expr {
    /// How many levels deep the tree is (0 for a constant or a property).
    pub(crate) fn height(&self) -> usize {
        let below = match self {
            Expr::Const(_) | Expr::Prop(_) => return 0,
            Expr::In { .. } => 0,
            Expr::Neg(e) | Expr::Not(e) | Expr::BoolCast(e) => e.height(),
            Expr::And(items) | Expr::Or(items) => items.iter().map(Expr::height).max().unwrap_or(0),
            Expr::Cmp(_, l, r) | Expr::Eq(l, r) => l.height().max(r.height()),
        };
        below + 1
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

/// The most bytes of an expression an error message shows.
const MAX_SHOWN: usize = 256;

/// A `fmt::Write` that keeps the first [`MAX_SHOWN`] bytes and then stops the formatting.
struct Capped {
    out: String,
    truncated: bool,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MAX_SHOWN - self.out.len();
        if s.len() <= room {
            self.out.push_str(s);
            return Ok(());
        }
        let mut cut = room;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.out.push_str(&s[..cut]);
        self.truncated = true;
        Err(fmt::Error)
    }
}

/// `e` as an error message shows it: at most [`MAX_SHOWN`] bytes, then `...`.
fn shown(e: &dyn fmt::Display) -> String {
    let mut w = Capped {
        out: String::new(),
        truncated: false,
    };
    // An error here only means that the writer stopped the formatting.
    let _ = fmt::write(&mut w, format_args!("{e}"));
    if w.truncated {
        w.out.push_str("...");
    }
    w.out
}

/// An expression while it is built, with its height (how many nodes deep it is below its
/// root: 0 for a constant or a property) and its size (how many nodes it has). The parser
/// refuses to build a node whose height, plus the nesting around it, or whose size passes
/// the bounds, so that the finished tree is never deeper or larger: formatting, evaluating
/// and dropping it recurse once for each level and visit every node.
struct Node {
    expr: Expr,
    height: usize,
    size: usize,
}

impl Node {
    fn leaf(expr: Expr) -> Self {
        Node {
            expr,
            height: 0,
            size: 1,
        }
    }
}

/// Java `asBooleanExpression`: a boolean expression as is, a property as a boolean cast.
fn as_boolean(n: Node) -> Result<Node, FilterError> {
    match n.expr {
        Expr::Prop(_) => Ok(Node {
            expr: Expr::BoolCast(Box::new(n.expr)),
            height: n.height + 1,
            size: n.size + 1,
        }),
        ref e if e.is_boolean() => Ok(n),
        e => Err(invalid(format!(
            "Expression will not result in a boolean value: {}",
            shown(&e)
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
        Err(invalid(format!("Value '{}' cannot be compared.", shown(e))))
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
            return Err(invalid(format!(
                "'{}' cannot be compared with '{}'",
                shown(&l),
                shown(&r)
            )));
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
                "Illegal values of between, left value({}) must less than or equal to right value({})",
                shown(lv),
                shown(hv)
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
    max_nodes: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str, max_depth: usize, max_nodes: usize) -> Self {
        Parser {
            lexer: Lexer::new(src),
            ahead: VecDeque::with_capacity(2),
            depth: 0,
            max_depth,
            max_nodes,
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

    fn too_deep(&self) -> FilterError {
        FilterError::TooDeep {
            max: self.max_depth,
        }
    }

    /// One more level of parentheses or prefix operators (the parser's recursion).
    fn enter(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(self.too_deep());
        }
        Ok(())
    }

    /// Whether a node `height` levels deep with `size` nodes fits in the bounds, with the
    /// nesting around it.
    ///
    /// Every node is checked, so a left-nested chain (`a = b = c ...`, whose loop builds one
    /// level per operator without recursing) counts toward the bound like parentheses.
    fn fits(&self, height: usize, size: usize) -> Result<(), FilterError> {
        if self.depth + height > self.max_depth {
            return Err(self.too_deep());
        }
        if size > self.max_nodes {
            return Err(FilterError::TooLarge {
                max: self.max_nodes,
            });
        }
        Ok(())
    }

    /// `expr`, if it fits in the bounds ([`Parser::fits`]).
    fn node(&self, expr: Expr, height: usize, size: usize) -> Result<Node, FilterError> {
        self.fits(height, size)?;
        Ok(Node { expr, height, size })
    }

    /// [`as_boolean`] within the bounds.
    fn boolean(&self, n: Node) -> Result<Node, FilterError> {
        let n = as_boolean(n)?;
        self.node(n.expr, n.height, n.size)
    }

    /// The selector; returns it and the position of ignored trailing text, if any.
    pub(crate) fn selector(mut self) -> Result<(Expr, Option<usize>), FilterError> {
        let e = self.or_expr()?;
        let e = self.boolean(e)?;
        self.fill(1)?;
        let trailing = match &self.ahead[0] {
            (Tok::Eof, _) => None,
            (_, pos) => Some(*pos),
        };
        Ok((e.expr, trailing))
    }

    /// `left AND right` (`and`) or `left OR right`: a left operand that is already such a
    /// list takes `right` as one more item, as Java's left-nested tree would.
    fn logic(&self, left: Node, right: Node, and: bool) -> Result<Node, FilterError> {
        let left = self.boolean(left)?;
        let right = self.boolean(right)?;
        let size = left.size + right.size;
        let (items, height, size) = match (left.expr, and) {
            (Expr::And(mut items), true) | (Expr::Or(mut items), false) => {
                items.push(right.expr);
                (items, left.height.max(right.height + 1), size)
            }
            (l, _) => (
                vec![l, right.expr],
                left.height.max(right.height) + 1,
                size + 1,
            ),
        };
        let expr = if and {
            Expr::And(items)
        } else {
            Expr::Or(items)
        };
        self.node(expr, height, size)
    }

    fn or_expr(&mut self) -> Result<Node, FilterError> {
        let mut left = self.and_expr()?;
        while *self.peek()? == Tok::Or {
            self.bump()?;
            let right = self.and_expr()?;
            left = self.logic(left, right, false)?;
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Node, FilterError> {
        let mut left = self.equality_expr()?;
        while *self.peek()? == Tok::And {
            self.bump()?;
            let right = self.equality_expr()?;
            left = self.logic(left, right, true)?;
        }
        Ok(left)
    }

    fn equality_expr(&mut self) -> Result<Node, FilterError> {
        let mut left = self.comparison_expr()?;
        loop {
            let not = match self.peek()? {
                Tok::Eq => false,
                Tok::Ne => true,
                Tok::Is => {
                    self.bump()?;
                    let not = *self.peek()? == Tok::Not;
                    if not {
                        self.bump()?;
                    }
                    self.expect(Tok::Null)?;
                    let is_null = Expr::Eq(Box::new(left.expr), Box::new(Expr::Const(Const::Null)));
                    left = self.node(is_null, left.height + 1, left.size + 2)?;
                    if not {
                        left = self.not(left)?;
                    }
                    continue;
                }
                _ => return Ok(left),
            };
            self.bump()?;
            let right = self.comparison_expr()?;
            let height = left.height.max(right.height) + 1;
            let size = left.size + right.size + 1;
            left = self.node(equal(left.expr, right.expr)?, height, size)?;
            if not {
                left = self.not(left)?;
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

    fn in_list(&mut self, left: Node, not: bool) -> Result<Node, FilterError> {
        let list = self.string_list()?;
        match left.expr {
            Expr::Prop(prop) => self.node(Expr::In { prop, list, not }, 1, 1),
            other => Err(invalid(format!(
                "Expected a property for In expression, got: {}",
                shown(&other)
            ))),
        }
    }

    /// `[NOT] BETWEEN low AND high` after `value` (the `BETWEEN` is read).
    fn between_rest(&mut self, value: Node, not: bool) -> Result<Node, FilterError> {
        let low = self.unary_expr()?;
        self.expect(Tok::And)?;
        let high = self.unary_expr()?;
        // An AND (OR) of two comparisons, each with its own copy of `value`: checked before
        // the copy is made.
        let height = value.height.max(low.height).max(high.height) + 2;
        let size = 2 * value.size + low.size + high.size + 3;
        self.fits(height, size)?;
        let expr = if not {
            not_between(value.expr, low.expr, high.expr)?
        } else {
            between(value.expr, low.expr, high.expr)?
        };
        Ok(Node { expr, height, size })
    }

    fn comparison_expr(&mut self) -> Result<Node, FilterError> {
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
                let height = left.height.max(right.height) + 1;
                let size = left.size + right.size + 1;
                left = self.node(ordered(op, left.expr, right.expr)?, height, size)?;
                continue;
            }
            match self.peek()?.clone() {
                Tok::Between => {
                    self.bump()?;
                    left = self.between_rest(left, false)?;
                }
                Tok::In => {
                    self.bump()?;
                    left = self.in_list(left, false)?;
                }
                Tok::Not => {
                    // Java enters this loop on NOT and then needs NOT BETWEEN or NOT IN.
                    self.bump()?;
                    match self.bump()? {
                        (Tok::Between, _) => left = self.between_rest(left, true)?,
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

    fn unary_expr(&mut self) -> Result<Node, FilterError> {
        let prefix = self.peek()?.clone();
        if !matches!(prefix, Tok::Plus | Tok::Minus | Tok::Not) {
            return self.primary_expr();
        }
        self.enter()?;
        self.bump()?;
        let operand = self.unary_expr()?;
        self.depth -= 1;
        match prefix {
            Tok::Minus => self.node(
                Expr::Neg(Box::new(operand.expr)),
                operand.height + 1,
                operand.size + 1,
            ),
            Tok::Not => {
                let operand = self.boolean(operand)?;
                self.not(operand)
            }
            _ => Ok(operand),
        }
    }

    /// `NOT n` within the bounds.
    fn not(&self, n: Node) -> Result<Node, FilterError> {
        self.node(Expr::Not(Box::new(n.expr)), n.height + 1, n.size + 1)
    }

    fn primary_expr(&mut self) -> Result<Node, FilterError> {
        let (t, pos) = self.bump()?;
        Ok(Node::leaf(match t {
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
                return Ok(e);
            }
            t => return Err(Self::unexpected(t, pos)),
        }))
    }
}
