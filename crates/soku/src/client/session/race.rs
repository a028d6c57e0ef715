//! One connection attempt per address of the server, first success wins: the address
//! ssh reached (the server reports it from `SSH_CONNECTION`) first, then, after
//! [`STAGGER`] or its failure, every address of the host name the user typed. The name
//! is resolved meanwhile, so the common case waits for no DNS lookup. QUIC and TCP both
//! connect this way.

use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long the server's own address has to itself before the host name's other
/// addresses join the race. It is right unless the server sits behind NAT, where the
/// name's public address is the one that works.
pub const STAGGER: Duration = Duration::from_millis(300);

/// What is raced, for the error: "QUIC handshake", "TCP connection".
pub struct Goal<'a> {
    /// What one attempt achieves.
    pub what: &'a str,
    /// Appended to a timeout: " (UDP blocked?)".
    pub hint: &'a str,
}

/// Races `attempt` over the server's addresses until `deadline`; the winner and its
/// address, or why none won.
pub async fn race<T, F, Fut>(
    goal: Goal<'_>,
    primary: Option<IpAddr>,
    host: &str,
    port: u16,
    deadline: Instant,
    attempt: F,
) -> Result<(T, SocketAddr), String>
where
    T: Send + 'static,
    F: Fn(SocketAddr) -> Fut,
    Fut: Future<Output = Result<T, String>> + Send + 'static,
{
    let started = Instant::now();
    let name = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let resolving = tokio::task::spawn_blocking(move || {
        (name.as_str(), port).to_socket_addrs().map(|found| found.collect::<Vec<_>>())
    });
    let mut field =
        Field { attempts: JoinSet::new(), tried: Vec::new(), last_error: String::new() };
    if let Some(ip) = primary.filter(|ip| !ip.is_unspecified()) {
        field.start(SocketAddr::new(ip, port), &attempt);
        // The primary failing fast or not answering yet both lead to the wider race.
        let first = tokio::time::timeout_at((started + STAGGER).min(deadline), field.next()).await;
        if let Ok(Some(won)) = first {
            return Ok(won);
        }
    }
    if let Ok(Ok(Ok(found))) = tokio::time::timeout_at(deadline, resolving).await {
        for addr in found {
            field.start(addr, &attempt);
        }
    }
    if field.tried.is_empty() {
        return Err(format!("cannot find an address for {host}"));
    }
    match tokio::time::timeout_at(deadline, field.next()).await {
        Ok(Some(won)) => Ok(won),
        Ok(None) => Err(field.last_error),
        Err(_) => {
            let tried: Vec<String> = field.tried.iter().map(ToString::to_string).collect();
            Err(format!(
                "no {} with {} within {:.1} s{}",
                goal.what,
                tried.join(" or "),
                deadline.saturating_duration_since(started).as_secs_f64(),
                goal.hint
            ))
        }
    }
}

/// Attempts running at once; dropping it abandons the losers.
struct Field<T> {
    attempts: JoinSet<(SocketAddr, Result<T, String>)>,
    tried: Vec<SocketAddr>,
    last_error: String,
}

impl<T: Send + 'static> Field<T> {
    /// Starts an attempt on `addr` unless one is already under way.
    fn start<F, Fut>(&mut self, addr: SocketAddr, attempt: &F)
    where
        F: Fn(SocketAddr) -> Fut,
        Fut: Future<Output = Result<T, String>> + Send + 'static,
    {
        if self.tried.contains(&addr) {
            return;
        }
        self.tried.push(addr);
        let running = attempt(addr);
        self.attempts.spawn(async move { (addr, running.await) });
    }

    /// The next success; `None` once every attempt has failed.
    async fn next(&mut self) -> Option<(T, SocketAddr)> {
        while let Some(done) = self.attempts.join_next().await {
            match done {
                Ok((addr, Ok(won))) => return Some((won, addr)),
                Ok((_, Err(e))) => self.last_error = e,
                Err(e) => self.last_error = format!("attempt ended: {e}"),
            }
        }
        None
    }
}
