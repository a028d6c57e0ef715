//! Frames as the harnesses read them: a stream cut into pieces, decoded, and a message
//! sent through the wire and back.

use std::fmt::Debug;

use serde::{de::DeserializeOwned, Serialize};

use crate::frame::{self, Decoder, MAX_CONTROL_FRAME, PREFIX_LEN};
use crate::ProtoError;

/// Cuts `stream` into pieces as reads from a socket would: piece sizes come from the
/// stream's own bytes and `spread`: 0 gives one-byte pieces, larger values pieces of 1 to
/// `spread + 1` bytes.
pub fn pieces(stream: &[u8], spread: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = stream;
    std::iter::from_fn(move || {
        let &first = rest.first()?;
        let len = 1 + usize::from(first ^ spread) % (usize::from(spread) + 1);
        let (piece, tail) = rest.split_at(len.min(rest.len()));
        rest = tail;
        Some(piece)
    })
}

/// What a [`Decoder`] made of a stream: the messages, then how it ended (the first error,
/// or [`Decoder::finish`]).
#[derive(Debug, PartialEq)]
pub(super) struct Decoded<T> {
    pub(super) messages: Vec<T>,
    pub(super) end: Result<(), ProtoError>,
}

pub(super) fn decode_frames<'a, T: DeserializeOwned>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    limit: usize,
) -> Decoded<T> {
    let mut decoder = Decoder::new(limit);
    let mut messages = Vec::new();
    for piece in pieces {
        decoder.feed(piece);
        loop {
            match decoder.next_message() {
                Ok(Some(msg)) => messages.push(msg),
                Ok(None) => break,
                Err(e) => return Decoded { messages, end: Err(e) },
            }
        }
    }
    let end = decoder.finish();
    assert_eq!(end.is_ok(), decoder.buffered().is_empty());
    if let Err(e) = &end {
        assert_eq!(e, &ProtoError::Truncated);
    }
    Decoded { messages, end }
}

/// As [`decode_frames`], with [`Decoder::next_payload`]: the payloads, undecoded.
pub(super) fn decode_payloads<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    limit: usize,
) -> Decoded<Vec<u8>> {
    let mut decoder = Decoder::new(limit);
    let mut messages = Vec::new();
    for piece in pieces {
        decoder.feed(piece);
        loop {
            match decoder.next_payload() {
                Ok(Some(payload)) => {
                    assert!(payload.len() <= limit);
                    messages.push(payload);
                }
                Ok(None) => break,
                Err(e) => return Decoded { messages, end: Err(e) },
            }
        }
    }
    Decoded { messages, end: decoder.finish() }
}

/// Encodes `msg` as a frame and decodes it again, both through [`frame::decode_payload`]
/// and through a [`Decoder`]: the result must be `msg` itself.
pub(super) fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(msg: &T) {
    let wire = frame::to_vec(msg).expect("a decoded message encodes again");
    let payload = wire.get(PREFIX_LEN..).expect("a frame has a prefix");
    let again = frame::decode_payload::<T>(payload).expect("a re-encoded message decodes");
    assert_eq!(&again, msg, "the message changed on its way through the wire");
    let through = decode_frames::<T>([&wire[..]], MAX_CONTROL_FRAME);
    assert_eq!(through, Decoded { messages: vec![again], end: Ok(()) });
}
