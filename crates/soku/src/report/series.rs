//! From recorded samples to the charts' lines: goodput per interval, loss per
//! interval, phase spans, percentiles.

use super::collect::PathSample;
use super::svg::Band;

/// Goodput in Mbit/s per interval from cumulative verified bytes `(t, bytes)`, in
/// intervals of at least half a second (about 150 across the copy): points at each
/// interval's middle. A count that goes down (a new session after a reconnection
/// counts again from its own start) starts over from there.
pub fn goodput(verified: &[(f64, u64)], from: f64, to: f64) -> Vec<(f64, f64)> {
    // Equal intervals, so that the last is not a short one whose few bytes read as
    // a spike or a dip.
    let span = (to - from).max(0.0);
    let count = (span / ((span / 150.0).max(0.5))).round().max(1.0);
    let width = span / count;
    if width <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut i = 0;
    // The count at the start of the interval (the last sample at or before it).
    let mut base = verified.iter().take_while(|(t, _)| *t <= from).last().map_or(0, |v| v.1);
    while i < verified.len() && verified[i].0 <= from {
        i += 1;
    }
    let mut a = from;
    while a < to - 1e-9 {
        let b = (a + width).min(to);
        let mut gained = 0u64;
        let mut last = base;
        while i < verified.len() && verified[i].0 <= b {
            let v = verified[i].1;
            gained += v.saturating_sub(last);
            last = v;
            i += 1;
        }
        base = last;
        out.push(((a + b) / 2.0, gained as f64 * 8.0 / (b - a) / 1e6));
        a = b;
    }
    out
}

/// Percent of the packets sent in each interval between samples that were lost.
pub fn loss_per_interval(paths: &[PathSample]) -> Vec<(f64, f64)> {
    paths
        .windows(2)
        .filter_map(|w| {
            let sent = w[1].sent_packets.checked_sub(w[0].sent_packets)?;
            let lost = w[1].lost_packets.checked_sub(w[0].lost_packets)?;
            (sent > 0).then(|| (w[1].t, lost as f64 * 100.0 / sent as f64))
        })
        .collect()
}

/// The colour of a controller phase.
fn phase_color(phase: &str) -> &'static str {
    match phase {
        "startup" => "#f4a261",
        "drain" => "#e9c46a",
        "probe_bw" => "#8ecae6",
        "probe_rtt" => "#b5838d",
        _ => "#cccccc",
    }
}

/// Spans of equal phase: a sample's phase holds from it to the next sample.
pub fn phase_bands(paths: &[PathSample], to: f64) -> Vec<Band> {
    let mut bands: Vec<Band> = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let Some(phase) = &p.phase else { continue };
        let end = paths.get(i + 1).map_or(to, |n| n.t).max(p.t);
        match bands.last_mut() {
            Some(last) if last.name == *phase && (last.to - p.t).abs() < 1e-9 => last.to = end,
            _ => bands.push(Band {
                name: phase.clone(),
                color: phase_color(phase),
                from: p.t,
                to: end,
            }),
        }
    }
    bands
}

/// The `q` quantile (0..=1) of `values`, by nearest rank; `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: goodput off by the interval, or a reconnection's restart counted as
    /// negative (or huge) progress.
    #[test]
    fn goodput_per_interval() {
        // 1 MB per 0.1 s for 2 s: 80 Mbit/s throughout.
        let v: Vec<(f64, u64)> = (0..=20).map(|i| (i as f64 / 10.0, i * 1_000_000)).collect();
        let g = goodput(&v, 0.0, 2.0);
        assert_eq!(g.len(), 4);
        for (_, rate) in &g {
            assert!((rate - 80.0).abs() < 1e-6, "{g:?}");
        }
        // A new session counting from 0 again.
        let v = [(0.2, 5_000_000), (0.4, 10_000_000), (0.6, 1_000_000), (0.9, 3_000_000)];
        let g = goodput(&v, 0.0, 1.0);
        assert_eq!(g.len(), 2);
        assert!((g[0].1 - 160.0).abs() < 1e-6, "{g:?}");
        assert!((g[1].1 - 32.0).abs() < 1e-6, "{g:?}");
    }

    fn sample(t: f64, sent: u64, lost: u64, phase: &str) -> PathSample {
        PathSample {
            t,
            rtt_ms: 50.0,
            min_rtt_ms: 50.0,
            sent_packets: sent,
            lost_packets: lost,
            cwnd: 1,
            model_mbit: None,
            phase: Some(phase.into()),
        }
    }

    #[test]
    fn loss_and_phases() {
        let p = [
            sample(0.5, 100, 0, "startup"),
            sample(1.0, 300, 2, "startup"),
            sample(1.5, 500, 2, "probe_bw"),
            sample(2.0, 900, 6, "probe_bw"),
        ];
        assert_eq!(loss_per_interval(&p), [(1.0, 1.0), (1.5, 0.0), (2.0, 1.0)]);
        let b = phase_bands(&p, 2.5);
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].name.as_str(), b[0].from, b[0].to), ("startup", 0.5, 1.5));
        assert_eq!((b[1].name.as_str(), b[1].from, b[1].to), ("probe_bw", 1.5, 2.5));
        assert_eq!(quantile(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.9), Some(5.0));
        assert_eq!(quantile(&[5.0, 1.0, 3.0, 2.0, 4.0], 0.5), Some(3.0));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
