//! SQL92 property filters, as Apache RocketMQ 4.9.8 has them (`MessageSelector.bySql`).
//!
//! [`SqlFilter::compile`] reads the grammar of Java's `SelectorParser.jj`: comparisons
//! (`=`, `<>`, `>`, `>=`, `<`, `<=`), `[NOT] BETWEEN .. AND ..`, `[NOT] IN ('a', ..)`,
//! `IS [NOT] NULL`, `AND`, `OR`, `NOT`, parentheses, string literals (`'it''s'`), decimal
//! literals (`int`, or `long` beyond it; `10L`), floating-point literals (`1.5`, `.5`, `2E3`),
//! `TRUE`, `FALSE`, `NULL`, and property names (`a`, `TAGS`, `$x_1`). Keywords are case
//! insensitive; property names are not. It makes the checks Java makes when it builds the
//! expression (a string or boolean constant cannot be ordered, `NULL` cannot be compared
//! with `=`, `IN` needs a property, `BETWEEN` constants must be in order, `0.0` and literals
//! beyond `long` are refused, the whole must be a condition).
//!
//! [`SqlFilter::matches`] evaluates it over a message's properties with Java's rules for
//! missing properties and types (see the `eval` module for the conversions): a missing
//! property is NULL and a comparison with NULL is unknown, so the message does not match;
//! `a = 3` with `a` = `"3"` matches (the string is read as an `int`); a string that does not
//! read as the number it meets fails the whole expression. The message's tag is the `TAGS`
//! property.
//!
//! Differences from Java, on purpose: an expression longer than [`MAX_EXPRESSION_LEN`] bytes,
//! nesting deeper than [`MAX_DEPTH`] or compiling to more than [`MAX_NODES`] nodes is refused
//! (Java has no bound); Java's hexadecimal floating-point strings (`0x1p3`) are not read as
//! numbers. Like Java, the parser stops after a complete expression: `a = 1 b` is `a = 1`
//! ([`SqlFilter::ignored_from`] tells).

mod eval;
mod lexer;
mod parser;
#[cfg(test)]
mod tests;

pub use self::eval::{EvalError, Properties};

/// The longest expression [`SqlFilter::compile`] accepts, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 16 * 1024;

/// The deepest nesting [`SqlFilter::compile`] accepts: parentheses, and the levels of the
/// compiled tree (each operator is one, `<>` and `IS NOT NULL` are two: `NOT` of `=`), with
/// left-nested chains such as `a = b = c` counted in full.
pub const MAX_DEPTH: usize = 64;

/// The most nodes a compiled expression may have. `BETWEEN` copies its value operand into both
/// of its comparisons, so without a bound each nested `BETWEEN` would double the tree (a
/// 400-byte expression made millions of nodes); an expression without such copies has fewer
/// nodes than twice its length.
pub const MAX_NODES: usize = 2 * MAX_EXPRESSION_LEN;

/// Why an expression does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// Longer than [`MAX_EXPRESSION_LEN`].
    #[error("the expression is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Nests deeper than [`MAX_DEPTH`].
    #[error("the expression nests deeper than {max} levels")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// Compiles to more than [`MAX_NODES`] nodes.
    #[error("the expression compiles to more than {max} nodes")]
    TooLarge {
        /// The limit.
        max: usize,
    },
    /// Text that is not a token of the grammar.
    #[error("lexical error at byte {pos}: {message}")]
    Lexical {
        /// Byte offset in the expression.
        pos: usize,
        /// What is wrong.
        message: String,
    },
    /// Tokens in an order the grammar does not allow.
    #[error("syntax error at byte {pos}: {message}")]
    Syntax {
        /// Byte offset in the expression.
        pos: usize,
        /// What is wrong.
        message: String,
    },
    /// Grammatical, but refused by Java's expression checks.
    #[error("{message}")]
    Invalid {
        /// Java's reason.
        message: String,
    },
}

/// A compiled SQL92 filter.
#[derive(Debug, Clone)]
pub struct SqlFilter {
    source: String,
    expr: parser::Expr,
    ignored_from: Option<usize>,
}

impl SqlFilter {
    /// Compiles `expression` with the bounds [`MAX_EXPRESSION_LEN`], [`MAX_DEPTH`] and
    /// [`MAX_NODES`].
    pub fn compile(expression: &str) -> Result<Self, FilterError> {
        if expression.len() > MAX_EXPRESSION_LEN {
            return Err(FilterError::TooLong {
                len: expression.len(),
                max: MAX_EXPRESSION_LEN,
            });
        }
        let (expr, ignored_from) =
            parser::Parser::new(expression, MAX_DEPTH, MAX_NODES).selector()?;
        Ok(SqlFilter {
            source: expression.to_string(),
            expr,
            ignored_from,
        })
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.source
    }

    /// Where text after the complete expression begins, if there is any: Java's parser
    /// ignores it, and so does this one.
    pub fn ignored_from(&self) -> Option<usize> {
        self.ignored_from
    }

    /// Java's result: `Some(true)`/`Some(false)`, `None` for NULL (unknown), or an error
    /// (a value that Java cannot convert).
    pub fn evaluate<P: Properties + ?Sized>(&self, props: &P) -> Result<Option<bool>, EvalError> {
        Ok(match eval::eval(&self.expr, props)? {
            eval::Value::Bool(b) => Some(b),
            _ => None,
        })
    }

    /// How many levels deep the compiled tree is (a constant or a property: 0).
    #[cfg(test)]
    pub(crate) fn height(&self) -> usize {
        self.expr.height()
    }

    /// Whether a message with these properties matches: the expression is TRUE (NULL and
    /// errors do not match).
    pub fn matches<P: Properties + ?Sized>(&self, props: &P) -> bool {
        matches!(self.evaluate(props), Ok(Some(true)))
    }
}

impl std::fmt::Display for SqlFilter {
    /// The compiled form, fully parenthesised.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.expr)
    }
}
