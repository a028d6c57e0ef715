//! quinn's timers on a timerfd, so that pacing keeps the rate it computes.
//!
//! quinn paces each connection with a token bucket refilled at 1.25 x window / RTT and
//! holding about 2 ms of it (at least ten packets; `quinn-proto`'s `pacing.rs`). When the
//! bucket is empty it sets the connection's timer for the moment it is full again, and
//! any time the timer fires late is lost: the bucket does not fill beyond its size. With
//! tokio's timers, which count whole milliseconds and round up, a wait of 1.6 ms lasts 2
//! to 3 ms, so the connection sends a quarter to a half less than its pacing rate
//! whenever the bucket is that small.
//!
//! That showed in startup. On the emulated 100 Mbit/s x 100 ms path a copy's bytes in
//! flight stayed near three quarters of its window while the window grew, and the rate
//! rose 1.6-1.7x per round trip where doubling was meant
//! (`bench/results/2026-11-26/precise-timer/`). The path simulator, whose timers are
//! exact, doubles.
//!
//! This runtime is tokio's with one change: each connection's timer is a timerfd in the
//! runtime's epoll set, armed to the nanosecond, as the receive side's rests already are
//! (`quiet.rs`). Arming it is one `timerfd_settime` each time quinn moves the
//! connection's deadline. Where a timerfd cannot be made, tokio's timer is used.

use std::fmt;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use quinn::{AsyncTimer, AsyncUdpSocket, Runtime, TokioRuntime};
use tokio::io::unix::AsyncFd;

use crate::reactor::{arm_once, read_expiry};

/// tokio's runtime for quinn, with [`FdTimer`]s as the connections' timers.
#[derive(Debug)]
pub(crate) struct PreciseRuntime;

impl Runtime for PreciseRuntime {
    fn new_timer(&self, deadline: Instant) -> Pin<Box<dyn AsyncTimer>> {
        match FdTimer::new(deadline) {
            Ok(timer) => Box::pin(timer),
            Err(_) => TokioRuntime.new_timer(deadline),
        }
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        TokioRuntime.spawn(future);
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        TokioRuntime.wrap_udp_socket(socket)
    }

    fn now(&self) -> Instant {
        TokioRuntime.now()
    }
}

/// A one-shot timer on a timerfd (`CLOCK_MONOTONIC`, the clock of [`Instant`]).
pub(crate) struct FdTimer {
    fd: AsyncFd<Arc<OwnedFd>>,
    deadline: Instant,
}

impl FdTimer {
    /// Must be called inside a tokio runtime (the descriptor joins its reactor).
    pub(crate) fn new(deadline: Instant) -> io::Result<Self> {
        let fd = crate::reactor::timer()?;
        arm(fd.get_ref(), deadline)?;
        Ok(FdTimer { fd, deadline })
    }
}

/// Arms `fd` to expire once at `deadline` (at once if it has passed).
fn arm(fd: &OwnedFd, deadline: Instant) -> io::Result<()> {
    arm_once(fd, deadline.saturating_duration_since(Instant::now()))
}

impl AsyncTimer for FdTimer {
    fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        this.deadline = deadline;
        // Only fails for a bad descriptor or value, neither of which this timer makes;
        // `poll` reads the clock as well, so a failure would delay, never lose, the wake-up.
        let _ = arm(this.fd.get_ref(), deadline);
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context) -> Poll<()> {
        let this = self.get_mut();
        loop {
            if Instant::now() >= this.deadline {
                return Poll::Ready(());
            }
            let Ok(mut ready) = ready!(this.fd.poll_read_ready(cx)) else {
                // The reactor is gone (the runtime shuts down): nothing will wake us.
                return Poll::Ready(());
            };
            // An expiry: the clock check above now answers. Not yet (readiness left
            // from an expiry before the last reset): `try_io` clears it, and polling
            // again waits. Any other error: nothing more will come from this timer.
            if let Ok(Err(_)) = ready.try_io(|fd| read_expiry(fd.get_ref())) {
                return Poll::Ready(());
            }
        }
    }
}

impl fmt::Debug for FdTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FdTimer").field("deadline", &self.deadline).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Waits for a timer whose deadline is at most milliseconds away, failing the test
    /// (instead of hanging it) if nothing wakes its task within 5 s. The timeout's own
    /// wake-up would poll the timer, whose clock check then answers, so the elapsed
    /// time, not the timeout's result, is what tells a lost wake-up.
    async fn wait(timer: &mut Pin<Box<dyn AsyncTimer>>) {
        const LIMIT: Duration = Duration::from_secs(5);
        let start = Instant::now();
        let fired = std::future::poll_fn(move |cx| timer.as_mut().poll(cx));
        let _ = tokio::time::timeout(LIMIT, fired).await;
        let took = start.elapsed();
        assert!(took < LIMIT, "the timer's wake-up was lost: it answered after {took:?}");
    }

    #[tokio::test]
    async fn fires_no_earlier_than_its_deadline() {
        let rt = PreciseRuntime;
        for wait_us in [300u64, 1_600, 2_500] {
            let start = Instant::now();
            let mut timer = rt.new_timer(start + Duration::from_micros(wait_us));
            wait(&mut timer).await;
            let took = start.elapsed();
            assert!(took >= Duration::from_micros(wait_us), "{wait_us} us: fired after {took:?}");
        }
    }

    #[tokio::test]
    async fn a_reset_moves_the_deadline_both_ways() {
        let rt = PreciseRuntime;
        let start = Instant::now();
        let mut timer = rt.new_timer(start + Duration::from_secs(3600));
        timer.as_mut().reset(start + Duration::from_millis(2));
        wait(&mut timer).await;
        assert!(start.elapsed() < Duration::from_secs(60));

        // After it fired, a later deadline waits again.
        let later = Instant::now() + Duration::from_millis(5);
        timer.as_mut().reset(later);
        wait(&mut timer).await;
        assert!(Instant::now() >= later);
    }

    #[tokio::test]
    async fn a_deadline_in_the_past_is_ready_at_once() {
        let rt = PreciseRuntime;
        let past = Instant::now() - Duration::from_millis(1);
        let mut timer = rt.new_timer(past);
        wait(&mut timer).await;
    }
}
