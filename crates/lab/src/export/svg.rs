//! Horizontal bar charts as inline SVG, so the HTML report needs no script and fetches nothing.

use std::fmt::Write as _;

/// One bar.
pub struct Bar {
    /// Row label, left of the bar.
    pub label: String,
    /// Length of the bar, relative to the longest.
    pub value: f64,
    /// Text right of the bar (the formatted value).
    pub text: String,
    /// What the row is, which gives the bar its colour.
    pub role: BarRole,
    /// Each repetition's value, drawn as a dot on the bar with a line from the smallest to the largest; empty
    /// for a single repetition.
    pub samples: Vec<f64>,
}

/// What a bar's row is in its table: each is drawn in a colour of its own (the report's style sheet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarRole {
    /// An approach.
    Approach,
    /// The baseline the ratios compare with.
    Baseline,
    /// The ceiling: a reference, not a way to use SQLite from async Rust, so it must not read as one more approach.
    Ceiling,
}

impl BarRole {
    /// The bar's class attribute.
    fn class(self) -> &'static str {
        match self {
            Self::Approach => "bar",
            Self::Baseline => "bar baseline",
            Self::Ceiling => "bar ceiling",
        }
    }
}

const WIDTH: f64 = 960.0;
const LABEL_WIDTH: f64 = 270.0;
const VALUE_WIDTH: f64 = 150.0;
const BAR_HEIGHT: f64 = 22.0;
const GAP: f64 = 8.0;
const TOP: f64 = 34.0;

/// An SVG bar chart titled `title`, one bar per entry, in the given order.
pub fn bar_chart(title: &str, bars: &[Bar]) -> String {
    let max = bars
        .iter()
        .flat_map(|b| b.samples.iter().copied().chain([b.value]))
        .fold(0.0, f64::max);
    let height = TOP + bars.len() as f64 * (BAR_HEIGHT + GAP) + GAP;
    let span = WIDTH - LABEL_WIDTH - VALUE_WIDTH;
    let mut svg = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        svg,
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{t}">"#,
        t = escape(title)
    );
    let _ = write!(
        svg,
        r#"<text x="0" y="20" class="chart-title">{}</text>"#,
        escape(title)
    );
    for (i, bar) in bars.iter().enumerate() {
        let y = TOP + i as f64 * (BAR_HEIGHT + GAP);
        let length = if max > 0.0 {
            (bar.value / max * span).max(1.0)
        } else {
            1.0
        };
        let class = bar.role.class();
        let _ = write!(
            svg,
            r#"<text x="{lx}" y="{ty}" class="label" text-anchor="end">{label}</text><rect x="{LABEL_WIDTH}" y="{y}" width="{length:.1}" height="{BAR_HEIGHT}" class="{class}" rx="3"/><text x="{vx:.1}" y="{ty}" class="value">{text}</text>"#,
            lx = LABEL_WIDTH - 10.0,
            ty = y + BAR_HEIGHT * 0.72,
            label = escape(&bar.label),
            vx = LABEL_WIDTH + length + 8.0,
            text = escape(&bar.text),
        );
        if bar.samples.len() > 1 && max > 0.0 {
            let x = |v: f64| LABEL_WIDTH + v / max * span;
            let low = bar.samples.iter().copied().fold(f64::INFINITY, f64::min);
            let high = bar.samples.iter().copied().fold(0.0, f64::max);
            let middle = y + BAR_HEIGHT / 2.0;
            let _ = write!(
                svg,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{middle}" y2="{middle}" class="range"/>"#,
                x(low),
                x(high)
            );
            for value in &bar.samples {
                let _ = write!(
                    svg,
                    r#"<circle cx="{:.1}" cy="{middle}" r="3" class="sample"/>"#,
                    x(*value)
                );
            }
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Escapes text for XML and HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_and_the_baseline_bars_have_classes_of_their_own() {
        let bar = |label: &str, role| Bar {
            label: label.to_owned(),
            value: 1.0,
            text: "1".to_owned(),
            role,
            samples: Vec::new(),
        };
        let svg = bar_chart(
            "t",
            &[
                bar("ceiling", BarRole::Ceiling),
                bar("quicklite", BarRole::Approach),
                bar("tokio-rusqlite", BarRole::Baseline),
            ],
        );
        let classes: Vec<&str> = svg
            .split("<rect ")
            .skip(1)
            .map(|rect| {
                rect.split("class=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(classes, ["bar ceiling", "bar", "bar baseline"]);
    }
}
