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
//! (`lab/2026-11-26-precise-timer`). The path simulator, whose timers are
//! exact, doubles.
//!
//! This runtime is tokio's with one change: each connection's timer is a timerfd in the
//! runtime's epoll set, armed to the nanosecond, as the receive side's rests already are
//! (`batched_udp.rs`). Where a timerfd cannot be made, tokio's timer is used.
//!
//! quinn moves a connection's deadline after nearly every packet it handles, and mostly
//! later: a receiver's acknowledgement timer starts at each batch and stops at each
//! ACK, and the idle and keep-alive timers move with every packet. Arming the timerfd
//! on every move was a `timerfd_settime` per batch, 13 800 of them for a receiver's
//! 125 MB at 100 Mbit/s x 50 ms. So a timer is re-armed at once only when its deadline
//! moves earlier; a later deadline waits until the armed expiry, which then finds the
//! deadline not due and arms for it. That costs at most one early wake-up per armed
//! expiry (one per ~25 ms acknowledgement delay on that receiver) and never a late one.

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
    /// When the timerfd will expire, if it is armed and has not been read since: never
    /// after `deadline` (module docs).
    armed: Option<Instant>,
    /// `timerfd_settime` calls made (for tests).
    arms: u64,
}

impl FdTimer {
    /// Must be called inside a tokio runtime (the descriptor joins its reactor).
    pub(crate) fn new(deadline: Instant) -> io::Result<Self> {
        let fd = crate::reactor::timer()?;
        let mut timer = FdTimer { fd, deadline, armed: None, arms: 0 };
        timer.arm()?;
        Ok(timer)
    }

    /// Arms the timerfd for the deadline.
    fn arm(&mut self) -> io::Result<()> {
        self.arms += 1;
        arm_once(self.fd.get_ref(), self.deadline.saturating_duration_since(Instant::now()))?;
        self.armed = Some(self.deadline);
        Ok(())
    }
}

impl AsyncTimer for FdTimer {
    fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        this.deadline = deadline;
        if this.armed.is_some_and(|at| at <= deadline) {
            // It expires first at the earlier time; `poll` then arms for this one.
            return;
        }
        // Only fails for a bad descriptor or value, neither of which this timer makes;
        // `poll` reads the clock as well, so a failure would delay, never lose, the wake-up.
        let _ = this.arm();
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            if Instant::now() >= this.deadline {
                return Poll::Ready(());
            }
            if this.armed.is_none() {
                // It expired before the deadline moved to: arm for the deadline now.
                if this.arm().is_err() {
                    return Poll::Ready(());
                }
            }
            let Ok(mut ready) = ready!(this.fd.poll_read_ready(cx)) else {
                // The reactor is gone (the runtime shuts down): nothing will wake us.
                return Poll::Ready(());
            };
            match ready.try_io(|fd| read_expiry(fd.get_ref())) {
                // An expiry: the clock check above now answers. A one-shot timerfd
                // expires once per arming, so its readiness is cleared with it.
                Ok(Ok(())) => {
                    ready.clear_ready();
                    this.armed = None;
                }
                // Any other error: nothing more will come from this timer.
                Ok(Err(_)) => return Poll::Ready(()),
                // Not yet (readiness left from an expiry before the last arming):
                // `try_io` cleared it, and polling again waits.
                Err(_) => {}
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

    /// A deadline moved later again and again, as a receiver's acknowledgement timer
    /// moves with every batch, arms the timerfd once, not once per move, and the timer
    /// still fires at the last deadline, not at the first.
    #[tokio::test]
    async fn later_deadlines_wait_for_the_armed_expiry() {
        let start = Instant::now();
        let mut timer = FdTimer::new(start + Duration::from_millis(5)).unwrap();
        for step in 1..=100u64 {
            Pin::new(&mut timer)
                .reset(start + Duration::from_millis(5) + Duration::from_micros(100 * step));
        }
        assert_eq!(timer.arms, 1, "a later deadline armed the timerfd again");
        let last = start + Duration::from_millis(15);
        let mut boxed: Pin<Box<dyn AsyncTimer>> = Box::pin(timer);
        wait(&mut boxed).await;
        assert!(Instant::now() >= last, "fired at the first deadline, not the last");

        // An earlier deadline arms at once.
        let start = Instant::now();
        let mut timer = FdTimer::new(start + Duration::from_secs(3600)).unwrap();
        Pin::new(&mut timer).reset(start + Duration::from_millis(2));
        assert_eq!(timer.arms, 2);
        let mut boxed: Pin<Box<dyn AsyncTimer>> = Box::pin(timer);
        wait(&mut boxed).await;
        assert!(start.elapsed() < Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_deadline_in_the_past_is_ready_at_once() {
        let rt = PreciseRuntime;
        let past = Instant::now() - Duration::from_millis(1);
        let mut timer = rt.new_timer(past);
        wait(&mut timer).await;
    }
}
