//! What a command prints: an aligned table, `key: value` pairs, lines of text or a JSON
//! document; with `--json`, every kind becomes JSON (a table: an array of objects keyed by its
//! column names).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value};

static JSON_MODE: AtomicBool = AtomicBool::new(false);

/// Whether `--json` was given (for commands that print as they go).
pub(crate) fn set_json_mode(json: bool) {
    JSON_MODE.store(json, Ordering::Relaxed);
}

/// Whether commands that print as they go print JSON.
pub(crate) fn json_mode() -> bool {
    JSON_MODE.load(Ordering::Relaxed)
}

/// A table: column names and rows of cells.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns and no rows.
    pub fn new(columns: &[&str]) -> Self {
        Table {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (cells past the columns are dropped, missing ones are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.columns.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as text: a header of the column names each after a `#` (as Java's tools
    /// print them, so that `grep -v '^#'` drops it), columns padded to their widest cell, two
    /// spaces apart.
    pub fn render(&self) -> String {
        let header: Vec<String> = self.columns.iter().map(|c| format!("#{c}")).collect();
        let mut widths: Vec<usize> = header.iter().map(|c| c.chars().count()).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, cells: &[String]| {
            let last = cells.len().saturating_sub(1);
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                if i == last {
                    out.push_str(c);
                } else {
                    let _ = write!(out, "{c:<w$}  ");
                }
            }
            let kept = out.trim_end_matches(' ').len();
            out.truncate(kept);
            out.push('\n');
        };
        line(&mut out, &header);
        for r in &self.rows {
            line(&mut out, r);
        }
        out
    }

    fn to_json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|r| {
                    let mut o = Map::new();
                    for (k, v) in self.columns.iter().zip(r) {
                        o.insert(k.clone(), cell_json(k, v));
                    }
                    Value::Object(o)
                })
                .collect(),
        )
    }
}

/// Columns (and pair keys) of user data: names, ids, keys, tags and bodies stay strings in
/// JSON whatever they look like (`000123` is not `123`).
const TEXT_COLUMNS: &[&str] = &[
    "Topic",
    "Group",
    "Consumer Group",
    "ClientId",
    "Client Id",
    "MsgId",
    "OffsetID",
    "Msg Id",
    "Tags",
    "Tag",
    "Keys",
    "Key",
    "Body",
    "Message Body",
    "SubExpression",
    "Broker Name",
    "Cluster Name",
    "Producer Group",
    "Properties",
];

/// A cell of column `column` as JSON: text columns as strings, the others typed by
/// [`json_scalar`].
fn cell_json(column: &str, v: &str) -> Value {
    if TEXT_COLUMNS.contains(&column) {
        Value::from(v)
    } else {
        json_scalar(v)
    }
}

/// A cell as JSON: integers and decimals as numbers, the rest as strings.
fn json_scalar(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    if v.contains('.') {
        if let Ok(f) = v.parse::<f64>() {
            if f.is_finite() {
                return Value::from(f);
            }
        }
    }
    Value::from(v)
}

/// A command's result.
#[derive(Debug, Clone)]
pub enum Output {
    /// A table.
    Table(Table),
    /// Sections, each a title and a table (one per broker, say).
    Sections(Vec<(String, Table)>),
    /// `key: value` pairs, in order.
    Pairs(Vec<(String, String)>),
    /// Lines of text (JSON: an array of strings).
    Lines(Vec<String>),
    /// A JSON document (printed pretty in both modes).
    Json(Value),
    /// Several results, one after the other.
    Many(Vec<Output>),
    /// Nothing more: the command printed its output as it went.
    Printed,
    /// Text printed as it is (Java's own format), with its JSON document for `--json`.
    Text {
        /// The text (lines ending in a newline).
        text: String,
        /// The document.
        json: Value,
    },
}

impl Output {
    /// One line of text.
    pub fn line(s: impl Into<String>) -> Self {
        Output::Lines(vec![s.into()])
    }

    /// The text printed without `--json`.
    pub fn render_text(&self) -> String {
        match self {
            Output::Table(t) => t.render(),
            Output::Sections(s) => s
                .iter()
                .map(|(title, t)| format!("== {title} ==\n{}", t.render()))
                .collect::<Vec<_>>()
                .join("\n"),
            // Java's `%-20s %s` of `Key:` and its value (queryMsgById and the like).
            Output::Pairs(p) => p
                .iter()
                .map(|(k, v)| format!("{:<20} {v}\n", format!("{k}:")))
                .collect(),
            Output::Lines(l) => l.iter().map(|s| format!("{s}\n")).collect(),
            Output::Json(v) => format!(
                "{}\n",
                serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
            ),
            Output::Many(m) => m.iter().map(Output::render_text).collect(),
            Output::Text { text, .. } => text.clone(),
            Output::Printed => String::new(),
        }
    }

    /// The document printed with `--json`.
    pub fn to_json(&self) -> Value {
        match self {
            Output::Table(t) => t.to_json(),
            Output::Sections(s) => {
                let mut o = Map::new();
                for (title, t) in s {
                    o.insert(title.clone(), t.to_json());
                }
                Value::Object(o)
            }
            Output::Pairs(p) => {
                let mut o = Map::new();
                for (k, v) in p {
                    o.insert(k.clone(), cell_json(k, v));
                }
                Value::Object(o)
            }
            Output::Lines(l) => Value::Array(l.iter().map(|s| Value::from(s.as_str())).collect()),
            Output::Json(v) => v.clone(),
            Output::Many(m) => Value::Array(m.iter().map(Output::to_json).collect()),
            Output::Text { json, .. } => json.clone(),
            Output::Printed => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_aligned_and_its_json_is_typed() {
        let mut t = Table::new(&["Topic", "QID", "Lag"]);
        t.row(vec!["Orders".into(), "0".into(), "12".into()]);
        t.row(vec!["A".into(), "10".into(), "1.5".into()]);
        assert_eq!(
            t.render(),
            "#Topic  #QID  #Lag\nOrders  0     12\nA       10    1.5\n"
        );
        let pairs = Output::Pairs(vec![("Topic".into(), "T".into())]);
        assert_eq!(pairs.render_text(), format!("{:<20} T\n", "Topic:"));
        let j = Output::Table(t).to_json();
        assert_eq!(j[0]["Topic"], "Orders");
        assert_eq!(j[0]["QID"], 0);
        assert_eq!(j[1]["Lag"], 1.5);
    }

    #[test]
    fn user_strings_that_look_like_numbers_stay_strings_in_json() {
        let mut t = Table::new(&["MsgId", "Tags", "Keys", "Body", "Group", "Offset"]);
        t.row(vec![
            "0001".into(),
            "2024".into(),
            "000123".into(),
            "0.50".into(),
            "007".into(),
            "12".into(),
        ]);
        let j = Output::Table(t).to_json();
        assert_eq!(j[0]["MsgId"], "0001");
        assert_eq!(j[0]["Tags"], "2024");
        assert_eq!(j[0]["Keys"], "000123");
        assert_eq!(j[0]["Body"], "0.50");
        assert_eq!(j[0]["Group"], "007");
        assert_eq!(j[0]["Offset"], 12);
        let p = Output::Pairs(vec![("Message Body".into(), "42".into())]).to_json();
        assert_eq!(p["Message Body"], "42");
    }
}
