//! `soku diagnose`: what the server measures about its own host and what it saw of a
//! probe, sent to the client as [`Message::DiagnoseFacts`](crate::message::Message) and
//! [`Message::DiagnoseProbe`](crate::message::Message) on the control channel.
//!
//! These come from the peer, so the client treats every number as a claim: the decoder
//! bounds the frame (`frame::MAX_CONTROL_FRAME`), strings are cut to
//! [`MAX_NOTE_LEN`] by [`HostFacts::bounded`], and nothing here is used as a size to
//! allocate.

use serde::{Deserialize, Serialize};

/// Longest free-text note kept from a peer (a path or an error message).
pub const MAX_NOTE_LEN: usize = 512;

/// Longest probe the server runs on request, milliseconds: a hostile or confused client
/// cannot keep a server sending for longer.
pub const MAX_PROBE_MS: u32 = 10_000;

/// What a host says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// CPU cores the process may use.
    pub cores: u32,
    /// `net.core.rmem_max`, bytes, if readable.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`, bytes, if readable.
    pub wmem_max: Option<u64>,
    /// The receive buffer a soku UDP socket gets here (as the kernel reports it, which
    /// is twice the usable size on Linux), bytes.
    pub udp_recv_buffer: u64,
    /// The send buffer a soku UDP socket gets here, bytes (reported the same way).
    pub udp_send_buffer: u64,
    /// AES-128-GCM sealing speed on one core, bytes per second.
    pub aes_gcm_bps: u64,
    /// ChaCha20-Poly1305 sealing speed on one core, bytes per second.
    pub chacha_bps: u64,
    /// The file system speed measured here (the server: writing into the target).
    pub disk: Option<DiskSpeed>,
}

/// A file system's measured speed at one place.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSpeed {
    /// Where it was measured (a directory).
    pub path: String,
    /// Bytes per second (0 when it could not be measured).
    pub bytes_per_sec: u64,
    /// Bytes moved for the measurement.
    pub bytes: u64,
    /// Why it could not be measured, if it could not.
    pub error: Option<String>,
}

/// Which way a probe's data moves, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbeDirection {
    /// Client to server.
    Upload,
    /// Server to client.
    Download,
}

/// What the receiving side of a probe saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    /// Bytes received.
    pub bytes: u64,
    /// Rate over the probe's steady part (after the controller's start-up), bits per
    /// second.
    pub steady_bps: u64,
    /// UDP datagrams the kernel dropped for a full receive buffer while the probe ran
    /// (`RcvbufErrors` in `/proc/net/snmp`, counted for the host's network namespace).
    pub rcvbuf_errors: Option<u64>,
    /// The sender's tags (numbered unreliable datagrams, one per millisecond) that
    /// arrived.
    pub tags: u64,
    /// Tags that arrived after a higher-numbered one: reordered on the way (RFC 4737
    /// §3.3's definition, with the tags as the sequence).
    pub reordered: u64,
}

/// What the sending side of a probe saw of its own connection. RTTs are QUIC's
/// smoothed RTT, sampled every few milliseconds while the probe ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// Packets sent during the probe.
    pub packets: u64,
    /// Packets declared lost during the probe.
    pub lost: u64,
    /// The RTT before the probe's data (no queue of ours), microseconds.
    pub idle_rtt_us: u64,
    /// Smallest RTT seen, microseconds.
    pub min_rtt_us: u64,
    /// Mean RTT over the probe, microseconds.
    pub mean_rtt_us: u64,
    /// Mean RTT at the moments losses were detected, weighted by packets lost,
    /// microseconds (0 without losses).
    pub loss_rtt_us: u64,
    /// Largest RTT seen, microseconds.
    pub max_rtt_us: u64,
    /// Packets sent while the RTT stood in the lower half of its range (from the base,
    /// the smaller of `idle_rtt_us` and `min_rtt_us`, to `max_rtt_us`).
    pub packets_low: u64,
    /// Packets found lost while the RTT stood in the lower half of its range.
    pub lost_low: u64,
    /// Packets sent while the RTT stood in the upper half of its range.
    pub packets_high: u64,
    /// Packets found lost while the RTT stood in the upper half of its range.
    pub lost_high: u64,
    /// The path MTU (UDP payload) QUIC settled on, bytes.
    pub mtu: u16,
    /// Tags sent (see [`Received::tags`]): never retransmitted, so the share that did
    /// not arrive is the loss, whatever QUIC's loss detection made of reordering.
    pub tags: u64,
}

/// The server's account of one probe: the receiving side's (an upload) or the sending
/// side's (a download).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// Which probe.
    pub direction: ProbeDirection,
    /// On an upload: what the server received.
    pub received: Option<Received>,
    /// On a download: what the server's sending side saw.
    pub sent: Option<Sent>,
    /// Why the server could not run the probe, if it could not.
    pub error: Option<String>,
}

impl HostFacts {
    /// The facts with every peer-supplied string cut to [`MAX_NOTE_LEN`].
    pub fn bounded(mut self) -> HostFacts {
        if let Some(disk) = &mut self.disk {
            cut(&mut disk.path);
            if let Some(error) = &mut disk.error {
                cut(error);
            }
        }
        self
    }
}

impl ProbeReport {
    /// The report with its error note cut to [`MAX_NOTE_LEN`].
    pub fn bounded(mut self) -> ProbeReport {
        if let Some(error) = &mut self.error {
            cut(error);
        }
        self
    }
}

/// Cuts `s` to at most [`MAX_NOTE_LEN`] bytes, on a character boundary.
fn cut(s: &mut String) {
    if s.len() > MAX_NOTE_LEN {
        let mut end = MAX_NOTE_LEN;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_notes_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_NOTE_LEN);
        let facts = HostFacts {
            disk: Some(DiskSpeed { path: long.clone(), error: Some(long), ..Default::default() }),
            ..Default::default()
        }
        .bounded();
        let disk = facts.disk.expect("disk");
        assert!(disk.path.len() <= MAX_NOTE_LEN && disk.path.chars().all(|c| c == 'é'));
        assert!(disk.error.expect("error").len() <= MAX_NOTE_LEN);
    }
}
