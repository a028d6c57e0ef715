//! The report's path verdict: what limited this copy, in plain words, from the copy's
//! own figures only (no probe of its own, unlike a dedicated diagnosis would).
//!
//! The rules, in order:
//! 1. nothing crossed the network, or too little to judge;
//! 2. the `-l` limit was reached;
//! 3. one side's CPU was busy for most of the copy (soku's data path is one connection
//!    driven by one thread per side, so ~one busy core is a ceiling:
//!    `lab/2026-11-24-cpu-per-byte`);
//! 4. otherwise the link, with what the RTT and the loss say about it: a queue (the RTT
//!    rising above its minimum) means the bottleneck was full. Loss at a steady rate in
//!    every half second, whatever the RTT, is random loss, which soku-cc's model-based
//!    controller does not slow down for (`crates/soku-cc/src/model.rs`), unlike
//!    loss-based ones (RFC 9438's CUBIC shrinks its window on it); loss in bursts with a
//!    queue is the bottleneck's buffer overflowing. Steadiness is the median of the
//!    per-interval loss against the mean: random loss has a median near its mean,
//!    overflow a median near zero and a few spikes.
//!
//! Without a queue or loss, the copy's figures cannot tell a link that soku filled
//! exactly from a slow disk at the receiver; the verdict says so rather than guess.

/// The figures a verdict is drawn from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Bytes that crossed the network (verified minus resumed).
    pub sent_bytes: u64,
    /// Seconds of data transfer.
    pub seconds: f64,
    /// `-l`, bits per second.
    pub rate_limit_bps: Option<u64>,
    /// The smallest RTT seen, ms (QUIC only).
    pub min_rtt_ms: Option<f64>,
    /// The 90th percentile of the smoothed RTT once startup was over, ms.
    pub rtt_p90_ms: Option<f64>,
    /// Loss of the data sender's packets, percent; `None` when this side did not send
    /// the data and the server did not say.
    pub loss_percent: Option<f64>,
    /// The median of the loss per half-second interval, percent (see the module's
    /// comment).
    pub loss_median_percent: Option<f64>,
    /// The controller's last bottleneck estimate, bits per second.
    pub model_bps: Option<f64>,
    /// CPU of the data sender and of the receiver, in cores busy on average over the
    /// copy (CPU seconds over wall seconds); `None` if unknown.
    pub sender_cores: Option<f64>,
    /// See `sender_cores`.
    pub receiver_cores: Option<f64>,
}

/// What limited the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Nothing (or almost nothing) crossed the network.
    TooLittle,
    /// The user's `-l`.
    UserCap,
    /// The data sender's CPU.
    SenderCpu,
    /// The receiver's CPU.
    ReceiverCpu,
    /// The network path.
    Link,
}

/// The verdict: a one-line headline and a few sentences under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// What limited the copy.
    pub limit: Limit,
    /// One sentence.
    pub headline: String,
    /// More sentences, each on its own.
    pub notes: Vec<String>,
}

/// A side busy at least this many cores on average is taken as the limit.
const BUSY_CORES: f64 = 0.85;
/// Less data than this, or a shorter transfer, says nothing about a path.
const MIN_BYTES: u64 = 1 << 20;
/// See [`MIN_BYTES`].
const MIN_SECONDS: f64 = 0.5;
/// Loss below this (percent) is not worth a sentence.
const LOSS_WORTH_SAYING: f64 = 0.05;

/// A queue built: the RTT rose by more than a fifth of its minimum (soku-cc's probing
/// alone adds a quarter BDP one round in eight: `crates/soku-cc/src/model.rs`) and by at
/// least 2 ms (timer noise on short paths).
fn queue_ms(f: &Figures) -> Option<f64> {
    let (min, p90) = (f.min_rtt_ms?, f.rtt_p90_ms?);
    let rise = p90 - min;
    (rise > (0.2 * min).max(2.0)).then_some(rise)
}

fn mbit(bps: f64) -> String {
    format!("{:.1} Mbit/s", bps / 1e6)
}

/// What the loss says: random (steady), overflow (bursts with a queue), or both.
fn loss_note(loss: f64, median: Option<f64>, queue: Option<f64>) -> String {
    let Some(median) = median else {
        return format!("{loss:.2} % of the packets were lost.");
    };
    const KEEPS: &str = "soku-cc keeps its rate through random loss";
    if median >= 0.6 * loss {
        let rtt = match queue {
            Some(_) => "whether the queue was long or short",
            None => "and the RTT did not rise with it",
        };
        format!(
            "The loss of {loss:.2} % was random: about {median:.2} % of the packets of every \
             half second, {rtt}; {KEEPS}."
        )
    } else if median >= LOSS_WORTH_SAYING {
        format!(
            "Of the {loss:.2} % lost, about {median:.2} % was random (steady in every half \
             second; {KEEPS}); the rest came in bursts{}.",
            if queue.is_some() {
                " with the queue: the bottleneck's buffer overflowed"
            } else {
                ""
            }
        )
    } else if queue.is_some() {
        format!(
            "The loss of {loss:.2} % came in bursts with the queue: the bottleneck's buffer \
             overflowed."
        )
    } else {
        format!(
            "The loss of {loss:.2} % came in bursts without a queue: a policer or a flaky link \
             rather than a full buffer."
        )
    }
}

/// What limited the copy with these figures.
pub fn verdict(f: &Figures) -> Verdict {
    let rate = if f.seconds > 0.0 { f.sent_bytes as f64 * 8.0 / f.seconds } else { 0.0 };
    if f.sent_bytes < MIN_BYTES || f.seconds < MIN_SECONDS {
        return Verdict {
            limit: Limit::TooLittle,
            headline: format!(
                "Too little crossed the network to judge the path ({} in {:.2} s).",
                crate::ui::human_bytes(f.sent_bytes),
                f.seconds
            ),
            notes: Vec::new(),
        };
    }
    let mut notes = Vec::new();
    if let Some(limit) = f.rate_limit_bps.filter(|&l| rate >= 0.85 * l as f64) {
        return Verdict {
            limit: Limit::UserCap,
            headline: format!(
                "The -l limit was the limit: {} of the {} allowed.",
                mbit(rate),
                mbit(limit as f64)
            ),
            notes,
        };
    }
    let busiest = [(Limit::SenderCpu, f.sender_cores), (Limit::ReceiverCpu, f.receiver_cores)]
        .into_iter()
        .filter_map(|(limit, cores)| Some((limit, cores?)))
        .filter(|(_, cores)| *cores >= BUSY_CORES)
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((limit, cores)) = busiest {
        let who = if limit == Limit::SenderCpu { "sender" } else { "receiver" };
        if let Some(min) = f.min_rtt_ms {
            notes.push(format!(
                "The path itself was not measured at its limit (min RTT {min:.1} ms)."
            ));
        }
        return Verdict {
            limit,
            headline: format!(
                "The {who}'s CPU was the limit: {:.0} % of a core busy on average, at {}.",
                cores * 100.0,
                mbit(rate)
            ),
            notes,
        };
    }
    let queue = queue_ms(f);
    let model = f.model_bps.map(|m| format!(" (soku-cc's bottleneck estimate: {})", mbit(m)));
    let headline = match queue {
        Some(q) => format!(
            "The link was the limit: soku carried {}{}, and a queue of {q:.0} ms built at \
             the bottleneck.",
            mbit(rate),
            model.unwrap_or_default()
        ),
        None => format!(
            "The link was most likely the limit: soku carried {}{}, and neither side's CPU \
             was busy.",
            mbit(rate),
            model.unwrap_or_default()
        ),
    };
    if let Some(loss) = f.loss_percent.filter(|l| *l >= LOSS_WORTH_SAYING) {
        notes.push(loss_note(loss, f.loss_median_percent, queue));
    }
    if queue.is_none() && f.loss_percent.is_none_or(|l| l < LOSS_WORTH_SAYING) {
        notes.push(
            "No queue and no loss: a copy cannot tell a link it filled exactly from a slow \
             disk at the receiver by its own figures."
                .into(),
        );
    }
    Verdict { limit: Limit::Link, headline, notes }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 15 s copy of 175 MB at ~93 Mbit/s over 50 ms.
    fn path() -> Figures {
        Figures {
            sent_bytes: 175_000_000,
            seconds: 15.0,
            rate_limit_bps: None,
            min_rtt_ms: Some(50.0),
            rtt_p90_ms: Some(52.0),
            loss_percent: Some(0.0),
            loss_median_percent: Some(0.0),
            model_bps: Some(96e6),
            sender_cores: Some(0.1),
            receiver_cores: Some(0.08),
        }
    }

    /// Catches: random loss taken for congestion (or left unmentioned).
    #[test]
    fn loss_without_a_queue_is_random() {
        let v = verdict(&Figures {
            loss_percent: Some(0.5),
            loss_median_percent: Some(0.45),
            ..path()
        });
        assert_eq!(v.limit, Limit::Link);
        assert!(v.headline.contains("93.3 Mbit/s"), "{}", v.headline);
        assert!(v.headline.contains("96.0 Mbit/s"), "{}", v.headline);
        assert!(v.notes[0].contains("0.50 % was random"), "{:?}", v.notes);
        assert!(v.notes[0].contains("did not rise"), "{:?}", v.notes);
        // Steady loss beside a queue is still random (the emulated path of
        // lab/2026-11-24-report: 0.5 % random loss, a one-BDP queue).
        let v = verdict(&Figures {
            loss_percent: Some(0.63),
            loss_median_percent: Some(0.47),
            rtt_p90_ms: Some(89.0),
            ..path()
        });
        assert!(v.headline.contains("queue of 39 ms"), "{}", v.headline);
        assert!(v.notes[0].contains("0.63 % was random"), "{:?}", v.notes);
        // Part steady, part bursts.
        let v = verdict(&Figures {
            loss_percent: Some(1.0),
            loss_median_percent: Some(0.3),
            rtt_p90_ms: Some(89.0),
            ..path()
        });
        assert!(v.notes[0].contains("about 0.30 % was random"), "{:?}", v.notes);
        assert!(v.notes[0].contains("buffer overflowed"), "{:?}", v.notes);
        // Bursts without a queue.
        let v =
            verdict(&Figures { loss_percent: Some(1.0), loss_median_percent: Some(0.0), ..path() });
        assert!(v.notes[0].contains("policer"), "{:?}", v.notes);
    }

    /// Catches: a rising RTT not read as a full bottleneck.
    #[test]
    fn a_queue_means_the_link_was_full() {
        let v = verdict(&Figures { rtt_p90_ms: Some(80.0), loss_percent: Some(1.2), ..path() });
        assert_eq!(v.limit, Limit::Link);
        assert!(v.headline.contains("queue of 30 ms"), "{}", v.headline);
        assert!(v.notes[0].contains("buffer overflowed"), "{:?}", v.notes);
        // Timer noise on a short path is not a queue.
        let lan = Figures { min_rtt_ms: Some(0.2), rtt_p90_ms: Some(1.5), ..path() };
        assert!(!verdict(&lan).headline.contains("queue"));
    }

    /// Catches: a busy CPU blamed on the network, or the wrong side named.
    #[test]
    fn a_busy_side_is_named() {
        let v = verdict(&Figures { receiver_cores: Some(0.97), ..path() });
        assert_eq!(v.limit, Limit::ReceiverCpu);
        assert!(v.headline.starts_with("The receiver's CPU"), "{}", v.headline);
        let v = verdict(&Figures { sender_cores: Some(1.3), receiver_cores: Some(0.9), ..path() });
        assert_eq!(v.limit, Limit::SenderCpu);
    }

    /// Catches: -l not recognised, small copies judged, or no honest caveat when the
    /// figures cannot tell.
    #[test]
    fn limits_small_copies_and_the_unknowable() {
        let v = verdict(&Figures { rate_limit_bps: Some(100_000_000), ..path() });
        assert_eq!(v.limit, Limit::UserCap);
        let v = verdict(&Figures { sent_bytes: 1000, ..path() });
        assert_eq!(v.limit, Limit::TooLittle);
        let v = verdict(&Figures { seconds: 0.0, ..path() });
        assert_eq!(v.limit, Limit::TooLittle);
        let v = verdict(&path());
        assert!(v.headline.starts_with("The link was most likely"), "{}", v.headline);
        assert!(v.notes.iter().any(|n| n.contains("slow disk")), "{:?}", v.notes);
        // Without QUIC figures (TCP): still a verdict, no invented loss.
        let tcp = Figures {
            min_rtt_ms: None,
            rtt_p90_ms: None,
            loss_percent: None,
            loss_median_percent: None,
            model_bps: None,
            ..path()
        };
        let v = verdict(&tcp);
        assert_eq!(v.limit, Limit::Link);
        assert!(!v.headline.contains("estimate"), "{}", v.headline);
    }
}
