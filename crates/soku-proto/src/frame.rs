//! Length-prefixed frames: a 4-byte big-endian length, then a postcard payload.
//!
//! Small messages are written as one buffer (length and payload together) so a frame never
//! leaves a small tail waiting for an ACK (the small-packet problem of the seeds: a
//! separate 4-byte `write` followed by the data meets Nagle and delayed ACKs).

use serde::{de::DeserializeOwned, Serialize};

use crate::ProtoError;

/// Largest control frame we accept. Manifest entries are sent one per frame, so no
/// legitimate control frame comes near this.
pub const MAX_CONTROL_FRAME: usize = 1 << 20;

/// Length of the frame prefix.
pub const PREFIX_LEN: usize = 4;

/// Appends `msg` as one frame to `out`.
pub fn encode<T: Serialize>(msg: &T, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let start = out.len();
    out.extend_from_slice(&[0; PREFIX_LEN]);
    let with_payload = postcard::to_extend(msg, std::mem::take(out))
        .map_err(|e| ProtoError::Malformed(e.to_string()))?;
    *out = with_payload;
    let len = out.len() - start - PREFIX_LEN;
    if len > MAX_CONTROL_FRAME {
        out.truncate(start);
        return Err(ProtoError::FrameTooLarge { len, limit: MAX_CONTROL_FRAME });
    }
    // safe: len <= MAX_CONTROL_FRAME < u32::MAX
    let prefix = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    out[start..start + PREFIX_LEN].copy_from_slice(&prefix);
    Ok(())
}

/// Encodes `msg` as one frame in a new buffer.
pub fn to_vec<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtoError> {
    let mut out = Vec::new();
    encode(msg, &mut out)?;
    Ok(out)
}

/// Reads a frame length prefix and checks it against `limit`.
pub fn payload_len(prefix: [u8; PREFIX_LEN], limit: usize) -> Result<usize, ProtoError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > limit {
        return Err(ProtoError::FrameTooLarge { len, limit });
    }
    Ok(len)
}

/// Decodes a payload (without its prefix). Trailing bytes are an error: a frame holds
/// exactly one message.
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, ProtoError> {
    let (msg, rest) =
        postcard::take_from_bytes(payload).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(ProtoError::Malformed(format!("{} trailing bytes in frame", rest.len())));
    }
    Ok(msg)
}

/// A sans-IO frame decoder: feed it bytes as they arrive, take whole messages out.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    limit: usize,
}

impl Decoder {
    /// A decoder that refuses frames larger than `limit`.
    pub fn new(limit: usize) -> Self {
        Self { buf: Vec::new(), limit }
    }

    /// Adds received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Takes the next whole message, if one has arrived.
    pub fn next_message<T: DeserializeOwned>(&mut self) -> Result<Option<T>, ProtoError> {
        let Some(prefix) = self.buf.first_chunk::<PREFIX_LEN>() else { return Ok(None) };
        let len = payload_len(*prefix, self.limit)?;
        if self.buf.len() < PREFIX_LEN + len {
            return Ok(None);
        }
        let msg = decode_payload(&self.buf[PREFIX_LEN..PREFIX_LEN + len])?;
        self.buf.drain(..PREFIX_LEN + len);
        Ok(Some(msg))
    }

    /// Takes the next whole frame's payload, undecoded, if one has arrived (for hellos,
    /// which are decoded with [`crate::hello::decode_hello`]).
    pub fn next_payload(&mut self) -> Result<Option<Vec<u8>>, ProtoError> {
        let Some(prefix) = self.buf.first_chunk::<PREFIX_LEN>() else { return Ok(None) };
        let len = payload_len(*prefix, self.limit)?;
        if self.buf.len() < PREFIX_LEN + len {
            return Ok(None);
        }
        let payload = self.buf[PREFIX_LEN..PREFIX_LEN + len].to_vec();
        self.buf.drain(..PREFIX_LEN + len);
        Ok(Some(payload))
    }

    /// Call at end of input: bytes left over mean the peer stopped mid-frame.
    pub fn finish(&self) -> Result<(), ProtoError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(ProtoError::Truncated)
        }
    }

    /// Bytes received but not yet taken as messages.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::{ProbeDirection, ProbeReport, Sent};
    use crate::message::Message;

    #[test]
    fn round_trip_through_decoder_byte_by_byte() {
        let msgs = [
            Message::Progress { verified_bytes: 42 },
            Message::Fatal { message: "x".repeat(300) },
            Message::EndOfManifest { files: 3, bytes: 1 << 40 },
        ];
        let mut wire = Vec::new();
        for m in &msgs {
            encode(m, &mut wire).expect("encodes");
        }
        let mut dec = Decoder::new(MAX_CONTROL_FRAME);
        let mut out = Vec::new();
        for b in wire {
            dec.feed(&[b]);
            while let Some(m) = dec.next_message::<Message>().expect("decodes") {
                out.push(m);
            }
        }
        assert_eq!(out, msgs);
        dec.finish().expect("nothing left over");
    }

    #[test]
    fn oversized_frame_is_refused_before_buffering_it() {
        let mut dec = Decoder::new(1024);
        dec.feed(&(1u32 << 30).to_be_bytes());
        assert_eq!(
            dec.next_message::<Message>(),
            Err(ProtoError::FrameTooLarge { len: 1 << 30, limit: 1024 })
        );
    }

    #[test]
    fn truncated_frame_is_reported_at_end_of_input() {
        let wire = to_vec(&Message::Progress { verified_bytes: 7 }).expect("encodes");
        let mut dec = Decoder::new(MAX_CONTROL_FRAME);
        dec.feed(&wire[..wire.len() - 1]);
        assert_eq!(dec.next_message::<Message>(), Ok(None));
        assert_eq!(dec.finish(), Err(ProtoError::Truncated));
    }

    #[test]
    fn malformed_payload_is_an_error_not_a_panic() {
        for garbage in [&[0xffu8; 9][..], &[200, 1, 2, 3], &[]] {
            let mut wire = (garbage.len() as u32).to_be_bytes().to_vec();
            wire.extend_from_slice(garbage);
            let mut dec = Decoder::new(MAX_CONTROL_FRAME);
            dec.feed(&wire);
            assert!(matches!(dec.next_message::<Message>(), Err(ProtoError::Malformed(_))));
        }
    }

    #[test]
    fn trailing_bytes_in_a_frame_are_refused() {
        let mut payload =
            postcard::to_stdvec(&Message::Progress { verified_bytes: 1 }).expect("ok");
        payload.push(0);
        assert!(matches!(decode_payload::<Message>(&payload), Err(ProtoError::Malformed(_))));
    }

    #[test]
    fn diagnose_reports_round_trip_through_a_frame() {
        let report = ProbeReport {
            direction: ProbeDirection::Download,
            received: None,
            sent: Some(Sent { packets: 10, lost: 1, mtu: 1452, ..Default::default() }),
            error: None,
        };
        let msg = Message::DiagnoseProbe(report);
        let bytes = to_vec(&msg).expect("encode");
        let back: Message = decode_payload(&bytes[PREFIX_LEN..]).expect("decode");
        assert_eq!(back, msg);
    }

    /// A listing batch of `soku sftp` ([`crate::browse::LISTING_BATCH`] entries of the
    /// longest name and link target) fits one control frame.
    #[test]
    fn a_full_listing_batch_of_the_longest_names_fits_a_frame() {
        use crate::browse::{Answer, Listed, LISTING_BATCH, TYPE_LINK};
        use crate::name::Name;
        let entry = Listed {
            name: Name::from_bytes(vec![b'x'; 255]),
            mode: TYPE_LINK | 0o777,
            links: u64::MAX,
            uid: u32::MAX,
            gid: u32::MAX,
            owner: Some("o".repeat(32)),
            group: Some("g".repeat(32)),
            size: u64::MAX,
            mtime: i64::MIN,
            target: Some(Name::from_bytes(vec![b'/'; 4096])),
        };
        let answer =
            Message::Answer(Answer::Listing { entries: vec![entry; LISTING_BATCH], more: true });
        let framed = to_vec(&answer).expect("encode");
        assert!(framed.len() < MAX_CONTROL_FRAME, "{} bytes", framed.len());
    }
}
