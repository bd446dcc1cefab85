//! The lag-over-time chart: an inline SVG drawn on the server (no script, no external file).

use super::html::Html;
use super::lag_history::Sample;
use super::time::format_clock;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 26.0;

/// The smallest "round" number (1, 2 or 5 times a power of ten) at least `v` (and at least 1).
fn nice_ceiling(v: i64) -> i64 {
    let v = v.max(1);
    let mut base = 1i64;
    loop {
        for m in [1, 2, 5] {
            if let Some(c) = base.checked_mul(m) {
                if c >= v {
                    return c;
                }
            } else {
                return v;
            }
        }
        match base.checked_mul(10) {
            Some(b) => base = b,
            None => return v,
        }
    }
}

/// The chart of `samples` (oldest first), with `id="lag-chart"`, the number of samples in
/// `data-samples` and the newest lag in `data-last-lag`.
pub fn lag_chart(samples: &[Sample]) -> Html {
    let mut h = Html::new();
    let count = samples.len().to_string();
    let last = samples
        .last()
        .map(|s| s.lag.to_string())
        .unwrap_or_default();
    let view_box = format!("0 0 {WIDTH} {HEIGHT}");
    h.open(
        "svg",
        &[
            ("xmlns", "http://www.w3.org/2000/svg"),
            ("id", "lag-chart"),
            ("class", "chart"),
            ("viewBox", &view_box),
            ("width", "720"),
            ("height", "200"),
            ("role", "img"),
            ("aria-label", "lag over time"),
            ("data-samples", &count),
            ("data-last-lag", &last),
        ],
    );
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let max = nice_ceiling(samples.iter().map(|s| s.lag).max().unwrap_or(0));
    // Horizontal grid lines and their labels: 0, half, max.
    for (i, value) in [(0, 0), (1, max / 2), (2, max)] {
        let y = TOP + plot_h - plot_h * f64::from(i) / 2.0;
        let line = format!("{LEFT},{y:.1} {:.1},{y:.1}", WIDTH - RIGHT);
        h.open("polyline", &[("class", "grid"), ("points", &line)])
            .close("polyline");
        let (ty, tx) = (format!("{:.1}", y + 4.0), format!("{:.1}", LEFT - 6.0));
        h.open("text", &[("x", &tx), ("y", &ty), ("text-anchor", "end")])
            .text(value)
            .close("text");
    }
    if samples.is_empty() {
        let (x, y) = (
            format!("{:.1}", LEFT + plot_w / 2.0),
            format!("{:.1}", TOP + plot_h / 2.0),
        );
        h.open("text", &[("x", &x), ("y", &y), ("text-anchor", "middle")])
            .text("no samples yet")
            .close("text");
        h.close("svg");
        return h;
    }
    let (t0, t1) = (samples[0].at_ms, samples[samples.len() - 1].at_ms);
    let span = (t1 - t0).max(1) as f64;
    let point = |s: &Sample| -> (f64, f64) {
        let x = if samples.len() == 1 {
            LEFT + plot_w
        } else {
            LEFT + plot_w * (s.at_ms - t0) as f64 / span
        };
        let y = TOP + plot_h - plot_h * s.lag as f64 / max as f64;
        (x, y)
    };
    let points: Vec<String> = samples
        .iter()
        .map(|s| {
            let (x, y) = point(s);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let base = TOP + plot_h;
    let (first_x, _) = point(&samples[0]);
    let (last_x, last_y) = point(&samples[samples.len() - 1]);
    let area = format!(
        "{first_x:.1},{base:.1} {} {last_x:.1},{base:.1}",
        points.join(" ")
    );
    h.open("polygon", &[("class", "area"), ("points", &area)])
        .close("polygon");
    h.open(
        "polyline",
        &[("class", "line"), ("points", &points.join(" "))],
    )
    .close("polyline");
    let (cx, cy) = (format!("{last_x:.1}"), format!("{last_y:.1}"));
    h.open("circle", &[("cx", &cx), ("cy", &cy), ("r", "3")])
        .close("circle");
    // Time labels (UTC) under the plot: the first and the newest sample.
    let ly = format!("{:.1}", HEIGHT - 8.0);
    let (lx, rx) = (format!("{LEFT:.1}"), format!("{:.1}", WIDTH - RIGHT));
    h.open("text", &[("x", &lx), ("y", &ly), ("text-anchor", "start")])
        .text(format_clock(t0))
        .close("text");
    h.open("text", &[("x", &rx), ("y", &ly), ("text-anchor", "end")])
        .text(format!("{} UTC", format_clock(t1)))
        .close("text");
    h.close("svg");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ceilings() {
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(1), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(14), 20);
        assert_eq!(nice_ceiling(200), 200);
        assert_eq!(nice_ceiling(201), 500);
        assert_eq!(nice_ceiling(i64::MAX), i64::MAX);
    }

    #[test]
    fn the_chart_draws_every_sample() {
        let samples = [
            Sample { at_ms: 0, lag: 0 },
            Sample {
                at_ms: 1000,
                lag: 10,
            },
            Sample {
                at_ms: 2000,
                lag: 5,
            },
        ];
        let svg = lag_chart(&samples).into_string();
        assert!(svg.contains("data-samples=\"3\""));
        assert!(svg.contains("data-last-lag=\"5\""));
        // x from 56 to 704, y from 174 (0) to 12 (10).
        assert!(
            svg.contains("points=\"56.0,174.0 380.0,12.0 704.0,93.0\""),
            "{svg}"
        );
        let empty = lag_chart(&[]).into_string();
        assert!(empty.contains("no samples yet") && empty.contains("data-samples=\"0\""));
    }
}
