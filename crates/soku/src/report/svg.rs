//! Time-series line charts as inline SVG: no script, no external resource, text as
//! text (so the page stays searchable and the browser draws it sharply at any zoom).
//! The bench draws its own charts (`bench/src/svg.rs`) for categorical x axes; these
//! have a time axis and phase bands.

use std::fmt::Write as _;

use super::escape::escape;

/// One line: a legend name, a colour, points (seconds, value).
pub struct Line {
    /// Legend text.
    pub name: String,
    /// CSS colour.
    pub color: &'static str,
    /// (x seconds, y) in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (a reference such as a minimum), not solid.
    pub dashed: bool,
}

/// A span of time drawn as a coloured strip under the plot (the controller's phase).
pub struct Band {
    /// Legend text.
    pub name: String,
    /// CSS colour.
    pub color: &'static str,
    /// Start and end, seconds.
    pub from: f64,
    /// See `from`.
    pub to: f64,
}

/// A chart over time.
pub struct Chart {
    /// Title on top.
    pub title: String,
    /// The y axis label, with its unit: "Mbit/s", "ms".
    pub y_label: String,
    /// The x axis runs from 0 to this, seconds.
    pub x_max: f64,
    /// The lines.
    pub lines: Vec<Line>,
    /// Strips under the plot; empty for none.
    pub bands: Vec<Band>,
    /// The top of the y axis when not the largest value (lines above it are cut at
    /// the top, so that one far larger line does not flatten the others).
    pub y_cap: Option<f64>,
}

const W: f64 = 900.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 44.0;
const PLOT_H: f64 = 200.0;
const BAND_H: f64 = 14.0;
/// Lines with at most this many points get a marker on each.
const SPARSE: usize = 24;

/// A round step near `span / 5`: 1, 2 or 5 times a power of ten.
pub fn nice_step(span: f64) -> f64 {
    if !(span.is_finite() && span > 0.0) {
        return 1.0;
    }
    let raw = span / 5.0;
    let pow = 10f64.powf(raw.log10().floor());
    let m = raw / pow;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * pow
}

/// A tick label without trailing zeros: 0.5, 2, 250.
fn tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 { 0 } else { (-step.log10().floor()) as usize };
    format!("{v:.decimals$}")
}

impl Chart {
    /// The top of the y axis: a tick step above the largest value (at least 1).
    fn y_max(&self) -> (f64, f64) {
        let top = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
            .fold(0.0f64, f64::max);
        let top = self.y_cap.filter(|c| *c > 0.0 && *c < top).unwrap_or(top);
        let top = if top > 0.0 { top * 1.08 } else { 1.0 };
        let step = nice_step(top);
        ((top / step).ceil() * step, step)
    }

    /// The SVG element.
    pub fn render(&self) -> String {
        let (y_max, y_step) = self.y_max();
        let x_max = if self.x_max > 0.0 { self.x_max } else { 1.0 };
        let x_step = nice_step(x_max);
        let pw = W - LEFT - RIGHT;
        let band_space = if self.bands.is_empty() { 0.0 } else { BAND_H + 24.0 };
        let h = TOP + PLOT_H + 44.0 + band_space;
        let x = |t: f64| LEFT + (t.clamp(0.0, x_max) / x_max) * pw;
        let y = |v: f64| TOP + PLOT_H - (v.clamp(0.0, y_max) / y_max) * PLOT_H;
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{}">"#,
            escape(&self.title)
        );
        let _ =
            write!(s, r#"<text class="title" x="{LEFT}" y="20">{}</text>"#, escape(&self.title));
        // Legend, right-aligned on the title's line.
        let mut lx = W - RIGHT;
        for line in self.lines.iter().rev() {
            let width = 28.0 + 7.0 * line.name.chars().count() as f64;
            lx -= width;
            let dash = if line.dashed { r#" stroke-dasharray="5 3""# } else { "" };
            let _ = write!(
                s,
                r#"<line x1="{lx:.1}" x2="{:.1}" y1="16" y2="16" stroke="{}" stroke-width="2.5"{dash}/><text class="legend" x="{:.1}" y="20">{}</text>"#,
                lx + 18.0,
                line.color,
                lx + 22.0,
                escape(&line.name)
            );
        }
        // Grid and y ticks.
        let mut v = 0.0;
        while v <= y_max + y_step / 2.0 {
            let py = y(v);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{LEFT}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT + pw,
                LEFT - 6.0,
                py + 4.0,
                tick(v, y_step)
            );
            v += y_step;
        }
        // X ticks.
        let mut t = 0.0;
        while t <= x_max + x_step / 100.0 {
            let px = x(t);
            let _ = write!(
                s,
                r#"<line class="axis" x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                TOP + PLOT_H,
                TOP + PLOT_H + 5.0,
                TOP + PLOT_H + 18.0,
                tick(t, x_step)
            );
            t += x_step;
        }
        let _ = write!(
            s,
            r#"<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{:.1}"/><line class="axis" x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}"/>"#,
            TOP + PLOT_H,
            LEFT + pw,
            TOP + PLOT_H,
            TOP + PLOT_H
        );
        let _ = write!(
            s,
            r#"<text class="label" x="{:.1}" y="{:.1}" text-anchor="middle">time since start (s)</text>"#,
            LEFT + pw / 2.0,
            TOP + PLOT_H + 36.0
        );
        let _ = write!(
            s,
            r#"<text class="label" transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + PLOT_H / 2.0,
            escape(&self.y_label)
        );
        for line in &self.lines {
            let mut d = String::new();
            for &(t, v) in &line.points {
                if !(t.is_finite() && v.is_finite()) {
                    continue;
                }
                let _ =
                    write!(d, "{}{:.1},{:.1}", if d.is_empty() { "M" } else { " L" }, x(t), y(v));
            }
            let dash = if line.dashed { r#" stroke-dasharray="5 3""# } else { "" };
            let _ = write!(
                s,
                r#"<path d="{d}" fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round"{dash}/>"#,
                line.color
            );
            // A short copy has few samples: each is marked, so that one alone shows.
            let finite = line.points.iter().filter(|(t, v)| t.is_finite() && v.is_finite());
            if finite.clone().count() <= SPARSE {
                for &(t, v) in finite {
                    let _ = write!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                        x(t),
                        y(v),
                        line.color
                    );
                }
            }
        }
        if !self.bands.is_empty() {
            let by = TOP + PLOT_H + 46.0;
            let _ = write!(
                s,
                r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">phase</text>"#,
                LEFT - 6.0,
                by + 11.0
            );
            let mut seen: Vec<(&str, &str)> = Vec::new();
            for band in &self.bands {
                let (x0, x1) = (x(band.from), x(band.to));
                let _ = write!(
                    s,
                    r#"<rect x="{x0:.1}" y="{by:.1}" width="{:.1}" height="{BAND_H}" fill="{}"><title>{}</title></rect>"#,
                    (x1 - x0).max(1.0),
                    band.color,
                    escape(&band.name)
                );
                if !seen.iter().any(|(n, _)| *n == band.name) {
                    seen.push((&band.name, band.color));
                }
            }
            let mut lx = LEFT;
            for (name, color) in seen {
                let _ = write!(
                    s,
                    r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{color}"/><text class="legend" x="{:.1}" y="{:.1}">{}</text>"#,
                    by + BAND_H + 6.0,
                    lx + 16.0,
                    by + BAND_H + 16.0,
                    escape(name)
                );
                lx += 30.0 + 7.0 * name.chars().count() as f64;
            }
        }
        s.push_str("</svg>");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a capped axis still scaled to the largest line.
    #[test]
    fn a_cap_sets_the_top_of_the_axis() {
        let line = |top: f64| Line {
            name: "x".into(),
            color: "#000",
            points: vec![(0.0, 1.0), (1.0, top)],
            dashed: false,
        };
        let chart = |cap| Chart {
            title: String::new(),
            y_label: String::new(),
            x_max: 1.0,
            lines: vec![line(10.0), line(20_000.0)],
            bands: Vec::new(),
            y_cap: cap,
        };
        assert_eq!(chart(None).y_max().0, 25_000.0);
        assert_eq!(chart(Some(15.0)).y_max().0, 20.0);
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(15.0), 5.0);
        assert_eq!(nice_step(0.9), 0.2);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(tick(0.4, 0.2), "0.4");
        assert_eq!(tick(250.0, 50.0), "250");
    }

    /// Catches: a chart that is not one well-formed SVG element, or text unescaped.
    #[test]
    fn a_chart_is_one_svg_with_escaped_text() {
        let chart = Chart {
            title: "a <b> & c".into(),
            y_label: "Mbit/s".into(),
            x_max: 10.0,
            lines: vec![Line {
                name: "<i>".into(),
                color: "#123456",
                points: vec![(0.0, 1.0), (5.0, f64::NAN), (10.0, 3.0)],
                dashed: false,
            }],
            bands: vec![Band { name: "probe_bw".into(), color: "#eee", from: 1.0, to: 9.0 }],
            y_cap: None,
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert!(svg.contains("a &lt;b&gt; &amp; c") && svg.contains("&lt;i&gt;"));
        assert!(!svg.contains("NaN"), "{svg}");
        assert!(svg.contains("time since start (s)") && svg.contains(">phase<"));
    }
}
