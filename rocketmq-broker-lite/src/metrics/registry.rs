//! The Prometheus text exposition format (version 0.0.4), written by hand: the endpoint only
//! needs counters, gauges and histograms whose values are read at scrape time, which takes
//! less code than adapting a client library's registry (and no dependency).
//!
//! Samples are grouped by family, so several sources (the broker and the name server of
//! `rocketmq-lite`, or a master and its slaves) may add to the same family.

use std::fmt::Write;

use super::{Histogram, LATENCY_BUCKETS_US};

/// The kind of a metric family (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    lines: String,
}

/// Metric families being written for one scrape.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<Family>,
}

/// Escapes a label value (`\`, `"` and newlines).
fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn labels(out: &mut String, labels: &[(&str, &str)], extra: Option<(&str, &str)>) {
    let mut all = labels.iter().copied().chain(extra).peekable();
    if all.peek().is_none() {
        return;
    }
    out.push('{');
    for (i, (k, v)) in all.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape(v, out);
        out.push('"');
    }
    out.push('}');
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

impl Exposition {
    fn family(&mut self, name: &'static str, help: &'static str, kind: Kind) -> &mut String {
        let i = match self.families.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.families.push(Family {
                    name,
                    help,
                    kind,
                    lines: String::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[i].lines
    }

    /// Declares a family without adding a sample (so it is listed even while empty).
    pub fn declare(&mut self, name: &'static str, help: &'static str, kind: Kind) {
        self.family(name, help, kind);
    }

    /// Adds one sample of a counter or gauge.
    pub fn sample(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: Kind,
        label_pairs: &[(&str, &str)],
        value: f64,
    ) {
        let out = self.family(name, help, kind);
        out.push_str(name);
        labels(out, label_pairs, None);
        let _ = writeln!(out, " {}", number(value));
    }

    /// Adds a gauge sample.
    pub fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        label_pairs: &[(&str, &str)],
        value: f64,
    ) {
        self.sample(name, help, Kind::Gauge, label_pairs, value);
    }

    /// Adds a counter sample.
    pub fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        label_pairs: &[(&str, &str)],
        value: f64,
    ) {
        self.sample(name, help, Kind::Counter, label_pairs, value);
    }

    /// Adds a histogram (`_bucket` per bound, `_sum` in seconds, `_count`).
    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        label_pairs: &[(&str, &str)],
        h: &Histogram,
    ) {
        let (cumulative, sum) = h.snapshot();
        let out = self.family(name, help, Kind::Histogram);
        for (i, n) in cumulative.iter().enumerate() {
            let le = match LATENCY_BUCKETS_US.get(i) {
                Some(&us) => number(us as f64 / 1e6),
                None => "+Inf".to_string(),
            };
            let _ = write!(out, "{name}_bucket");
            labels(out, label_pairs, Some(("le", &le)));
            let _ = writeln!(out, " {n}");
        }
        let _ = write!(out, "{name}_sum");
        labels(out, label_pairs, None);
        let _ = writeln!(out, " {}", number(sum));
        let _ = write!(out, "{name}_count");
        labels(out, label_pairs, None);
        let _ = writeln!(out, " {}", cumulative.last().copied().unwrap_or(0));
    }

    /// The text of every family.
    pub fn finish(self) -> String {
        let mut out = String::new();
        for f in self.families {
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.as_str());
            out.push_str(&f.lines);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_group_samples_from_several_sources() {
        let mut e = Exposition::default();
        e.gauge("a", "A.", &[("topic", "t\"1")], 1.5);
        e.counter("b", "B.", &[], 2.0);
        e.gauge("a", "A.", &[("topic", "u")], 3.0);
        let text = e.finish();
        assert_eq!(
            text,
            "# HELP a A.\n# TYPE a gauge\na{topic=\"t\\\"1\"} 1.5\na{topic=\"u\"} 3\n\
             # HELP b B.\n# TYPE b counter\nb 2\n"
        );
    }

    #[test]
    fn histograms_end_with_inf_sum_and_count() {
        let h = Histogram::default();
        h.observe(std::time::Duration::from_millis(2));
        let mut e = Exposition::default();
        e.histogram("lat_seconds", "L.", &[("code", "10")], &h);
        let text = e.finish();
        assert!(text.contains("lat_seconds_bucket{code=\"10\",le=\"0.001\"} 0\n"));
        assert!(text.contains("lat_seconds_bucket{code=\"10\",le=\"0.0025\"} 1\n"));
        assert!(text.contains("lat_seconds_bucket{code=\"10\",le=\"+Inf\"} 1\n"));
        assert!(text.contains("lat_seconds_sum{code=\"10\"} 0.002\n"));
        assert!(text.contains("lat_seconds_count{code=\"10\"} 1\n"));
    }
}
