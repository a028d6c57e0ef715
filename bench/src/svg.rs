//! Line charts as hand-written SVG: the few plots the report needs, no plotting crate.

use std::fmt::Write as _;

/// One line of a chart: a name and one y value per x (None = no point).
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Values, aligned with the chart's x values.
    pub ys: Vec<Option<f64>>,
}

/// A chart with numeric x values (`xs`), drawn at their positions on a linear axis
/// when `linear_x`, else evenly spaced (categorical, labelled with `x_labels`).
pub struct Chart<'a> {
    /// Title on top.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// X positions.
    pub xs: Vec<f64>,
    /// Tick labels for the x values.
    pub x_labels: Vec<String>,
    /// Spread x by value (time) or evenly (categories such as loss rates).
    pub linear_x: bool,
    /// Top of the y axis (bottom is 0).
    pub y_max: f64,
    /// The lines.
    pub series: Vec<Series>,
}

const COLORS: [&str; 8] =
    ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

impl Chart<'_> {
    /// Every chart's width and height in pixels.
    pub const SIZE: (f64, f64) = (760.0, 420.0);

    /// The SVG document.
    pub fn render(&self) -> String {
        let (w, h) = Self::SIZE;
        let (l, r, t, b) = (70.0, 180.0, 40.0, 60.0);
        let pw = w - l - r;
        let ph = h - t - b;
        let n = self.xs.len().max(1);
        let (xmin, xmax) =
            self.xs.iter().fold((f64::MAX, f64::MIN), |(a, z), &x| (a.min(x), z.max(x)));
        let xpos = |i: usize| -> f64 {
            if self.linear_x && xmax > xmin {
                l + (self.xs[i] - xmin) / (xmax - xmin) * pw
            } else if n == 1 {
                l + pw / 2.0
            } else {
                l + i as f64 / (n - 1) as f64 * pw
            }
        };
        let ymax = if self.y_max > 0.0 { self.y_max } else { 1.0 };
        let ypos = |y: f64| t + ph - (y.clamp(0.0, ymax) / ymax) * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
            l + pw / 2.0,
            esc(self.title)
        );
        for k in 0..=5 {
            let y = ymax * k as f64 / 5.0;
            let py = ypos(y);
            let _ = writeln!(
                s,
                r##"<line x1="{l}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                l + pw,
                l - 6.0,
                py + 4.0,
                fmt_num(y)
            );
        }
        let step = (n / 12).max(1);
        for i in (0..self.xs.len()).step_by(step) {
            let px = xpos(i);
            let label = self.x_labels.get(i).cloned().unwrap_or_default();
            let _ = writeln!(
                s,
                r##"<line x1="{px:.1}" x2="{px:.1}" y1="{}" y2="{}" stroke="#999"/><text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"##,
                t + ph,
                t + ph + 5.0,
                t + ph + 20.0,
                esc(&label)
            );
        }
        let _ = writeln!(
            s,
            r##"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            l + pw / 2.0,
            h - 15.0,
            esc(self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>"#,
            t + ph / 2.0,
            t + ph / 2.0,
            esc(self.y_label)
        );
        for (k, series) in self.series.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            let mut d = String::new();
            let mut pen_up = true;
            for (i, y) in series.ys.iter().enumerate() {
                match y {
                    Some(y) => {
                        let _ = write!(
                            d,
                            "{}{:.1},{:.1} ",
                            if pen_up { "M" } else { "L" },
                            xpos(i),
                            ypos(*y)
                        );
                        pen_up = false;
                    }
                    None => pen_up = true,
                }
            }
            let _ = writeln!(s, r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="2"/>"#);
            if !self.linear_x {
                for (i, y) in series.ys.iter().enumerate() {
                    if let Some(y) = y {
                        let _ = writeln!(
                            s,
                            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                            xpos(i),
                            ypos(*y)
                        );
                    }
                }
            }
            let ly = t + 10.0 + k as f64 * 18.0;
            let _ = writeln!(
                s,
                r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
                l + pw + 12.0,
                l + pw + 32.0,
                l + pw + 38.0,
                ly + 4.0,
                esc(&series.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Charts made by [`Chart::render`], placed left to right in one SVG document (each
/// stays an `<svg>` element of its own, moved by its `x`).
pub fn side_by_side(charts: &[String]) -> String {
    let (w, h) = Chart::SIZE;
    let total = w * charts.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{h}" viewBox="0 0 {total} {h}">"#
    );
    for (i, chart) in charts.iter().enumerate() {
        s.push_str(&chart.replacen("<svg ", &format!("<svg x=\"{}\" ", w * i as f64), 1));
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_gaps_and_legend() {
        let c = Chart {
            title: "t <1>",
            x_label: "x",
            y_label: "y",
            xs: vec![0.0, 1.0, 2.0],
            x_labels: vec!["0".into(), "1".into(), "2".into()],
            linear_x: false,
            y_max: 100.0,
            series: vec![Series { name: "a".into(), ys: vec![Some(10.0), None, Some(90.0)] }],
        };
        let svg = c.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert_eq!(svg.matches("M").count(), 2, "a gap starts a new subpath");
    }

    #[test]
    fn panels_sit_side_by_side() {
        let c = |title| Chart {
            title,
            x_label: "x",
            y_label: "y",
            xs: vec![0.0, 1.0],
            x_labels: vec!["0".into(), "1".into()],
            linear_x: false,
            y_max: 100.0,
            series: vec![Series { name: "a".into(), ys: vec![Some(10.0), Some(90.0)] }],
        };
        let both = side_by_side(&[c("left").render(), c("right").render()]);
        assert!(both
            .starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="1520" height="420""#));
        assert!(both.contains(r#"<svg x="0" xmlns"#) && both.contains(r#"<svg x="760" xmlns"#));
        assert_eq!(both.matches("<svg").count(), 3);
        assert!(both.find("left") < both.find("right"));
    }
}
