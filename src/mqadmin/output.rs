//! What a command prints: an aligned table, `key: value` pairs, lines of text or a JSON
//! document; with `--json`, every kind becomes JSON (a table: an array of objects keyed by its
//! column names).

use std::fmt::Write as _;

use serde_json::{Map, Value};

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

    /// The table as text: columns padded to their widest cell, two spaces apart.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
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
        line(&mut out, &self.columns);
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
                        o.insert(k.clone(), json_scalar(v));
                    }
                    Value::Object(o)
                })
                .collect(),
        )
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
            Output::Pairs(p) => {
                let w = p.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
                p.iter().map(|(k, v)| format!("{k:<w$}  {v}\n")).collect()
            }
            Output::Lines(l) => l.iter().map(|s| format!("{s}\n")).collect(),
            Output::Json(v) => format!(
                "{}\n",
                serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
            ),
            Output::Many(m) => m.iter().map(Output::render_text).collect(),
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
                    o.insert(k.clone(), json_scalar(v));
                }
                Value::Object(o)
            }
            Output::Lines(l) => Value::Array(l.iter().map(|s| Value::from(s.as_str())).collect()),
            Output::Json(v) => v.clone(),
            Output::Many(m) => Value::Array(m.iter().map(Output::to_json).collect()),
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
            "Topic   QID  Lag\nOrders  0    12\nA       10   1.5\n"
        );
        let j = Output::Table(t).to_json();
        assert_eq!(j[0]["Topic"], "Orders");
        assert_eq!(j[0]["QID"], 0);
        assert_eq!(j[1]["Lag"], 1.5);
    }
}
