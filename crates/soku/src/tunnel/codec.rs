//! Streaming zstd for `soku tunnel -C`, sans-IO: bytes in, bytes out, no sockets.
//!
//! Each direction of a tunnelled connection is one zstd frame. The compressor flushes
//! after every batch it is given, so whatever the relay read from its socket can be
//! decoded at once on the other side: an ssh keystroke is never held back waiting for
//! more bytes. The decompressor produces at most one caller-sized buffer per step, so a
//! small, highly compressed input cannot make it allocate without bound.

use std::io;

use zstd::stream::raw::{CParameter, DParameter, Decoder, Encoder, InBuffer, Operation, OutBuffer};

/// Level 1: fastest; incompressible input passes at close to memory speed.
const LEVEL: i32 = 1;
/// The compressor's window: 2^19 = 512 KiB (level 1's own choice, pinned so the
/// decompressor's limit below always admits it).
const WINDOW_LOG: u32 = 19;
/// The largest window the decompressor accepts from the peer: 2^20 = 1 MiB of memory
/// per direction at most.
const MAX_WINDOW_LOG: u32 = 20;
/// Scratch output per compressor call; any size works, as calls loop until done.
const SCRATCH: usize = 64 * 1024;

/// Compresses one direction of a connection.
pub struct Compressor {
    encoder: Encoder<'static>,
    scratch: Box<[u8]>,
}

impl Compressor {
    /// A compressor at level 1 with a 512 KiB window.
    pub fn new() -> io::Result<Self> {
        let mut encoder = Encoder::new(LEVEL)?;
        encoder.set_parameter(CParameter::WindowLog(WINDOW_LOG))?;
        Ok(Self { encoder, scratch: vec![0; SCRATCH].into_boxed_slice() })
    }

    /// Compresses `input` and flushes, appending to `out`: after this, everything given
    /// so far can be decoded from the bytes appended so far.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut input = InBuffer::around(input);
        while input.pos() < input.src.len() {
            let mut output = OutBuffer::around(&mut self.scratch[..]);
            self.encoder.run(&mut input, &mut output)?;
            out.extend_from_slice(output.as_slice());
        }
        loop {
            let mut output = OutBuffer::around(&mut self.scratch[..]);
            let left = self.encoder.flush(&mut output)?;
            out.extend_from_slice(output.as_slice());
            if left == 0 {
                return Ok(());
            }
        }
    }

    /// Ends the frame, appending its last bytes to `out`. Call once, at end of input.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        loop {
            let mut output = OutBuffer::around(&mut self.scratch[..]);
            let left = self.encoder.finish(&mut output, true)?;
            out.extend_from_slice(output.as_slice());
            if left == 0 {
                return Ok(());
            }
        }
    }
}

/// Decompresses one direction of a connection; every input byte comes from the peer.
pub struct Decompressor {
    decoder: Decoder<'static>,
    /// The last step that made progress ended a frame.
    frame_done: bool,
}

impl Decompressor {
    /// A decompressor that refuses windows above 1 MiB.
    pub fn new() -> io::Result<Self> {
        let mut decoder = Decoder::new()?;
        decoder.set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG))?;
        Ok(Self { decoder, frame_done: false })
    }

    /// One step: decodes from `input` into `out` and returns (bytes consumed, bytes
    /// produced). Call again while input is left or `out` came back full.
    pub fn step(&mut self, input: &[u8], out: &mut [u8]) -> io::Result<(usize, usize)> {
        let mut input = InBuffer::around(input);
        let mut output = OutBuffer::around(out);
        let hint = self.decoder.run(&mut input, &mut output)?;
        let (used, made) = (input.pos(), output.pos());
        if used > 0 || made > 0 {
            // zstd returns 0 exactly when a frame is decoded and fully flushed.
            self.frame_done = hint == 0;
        }
        Ok((used, made))
    }

    /// Whether the input so far ended exactly at the end of a frame (a clean end of
    /// stream); false for an empty or truncated stream.
    pub fn is_complete(&self) -> bool {
        self.frame_done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes all of `wire` with a small output buffer, as the relay does.
    fn decode_all(dec: &mut Decompressor, mut wire: &[u8], out_size: usize) -> Vec<u8> {
        let mut plain = Vec::new();
        let mut out = vec![0u8; out_size];
        loop {
            let (used, made) = dec.step(wire, &mut out).expect("valid input");
            wire = &wire[used..];
            plain.extend_from_slice(&out[..made]);
            if wire.is_empty() && made < out.len() {
                return plain;
            }
            assert!(used > 0 || made > 0, "no progress");
        }
    }

    #[test]
    fn each_push_is_decodable_at_once() {
        let mut enc = Compressor::new().expect("encoder");
        let mut dec = Decompressor::new().expect("decoder");
        for msg in [&b"SSH-2.0-OpenSSH_9.6\r\n"[..], b"x", b"keystroke", &[0u8; 100_000]] {
            let mut wire = Vec::new();
            enc.push(msg, &mut wire).expect("push");
            // Nothing is held back: the bytes of this push decode to exactly this push.
            assert_eq!(decode_all(&mut dec, &wire, 4096), msg);
            assert!(!dec.is_complete(), "the frame is not over yet");
        }
        let mut wire = Vec::new();
        enc.finish(&mut wire).expect("finish");
        assert!(decode_all(&mut dec, &wire, 4096).is_empty());
        assert!(dec.is_complete());
    }

    #[test]
    fn empty_stream_is_one_small_frame() {
        let mut enc = Compressor::new().expect("encoder");
        let mut wire = Vec::new();
        enc.finish(&mut wire).expect("finish");
        let mut dec = Decompressor::new().expect("decoder");
        assert!(decode_all(&mut dec, &wire, 16).is_empty());
        assert!(dec.is_complete());
    }

    #[test]
    fn truncated_stream_is_not_complete() {
        let mut enc = Compressor::new().expect("encoder");
        let mut wire = Vec::new();
        enc.push(b"hello hello hello", &mut wire).expect("push");
        enc.finish(&mut wire).expect("finish");
        let mut dec = Decompressor::new().expect("decoder");
        decode_all(&mut dec, &wire[..wire.len() - 2], 64);
        assert!(!dec.is_complete());
        let mut fresh = Decompressor::new().expect("decoder");
        assert!(!fresh.is_complete());
        let _ = decode_all(&mut fresh, &[], 64);
        assert!(!fresh.is_complete());
    }

    #[test]
    fn a_bomb_comes_out_one_buffer_at_a_time() {
        let mut enc = Compressor::new().expect("encoder");
        let mut wire = Vec::new();
        enc.push(&vec![7u8; 8 << 20], &mut wire).expect("push");
        assert!(wire.len() < 64 * 1024, "8 MiB of one byte compresses well");
        let mut dec = Decompressor::new().expect("decoder");
        let mut out = vec![0u8; 1024];
        let (used, made) = dec.step(&wire, &mut out).expect("step");
        assert_eq!(made, 1024, "one full buffer, no more");
        assert_eq!(decode_all(&mut dec, &wire[used..], 1024).len() + made, 8 << 20);
    }

    #[test]
    fn a_large_window_from_the_peer_is_refused() {
        let mut big = Encoder::new(LEVEL).expect("encoder");
        big.set_parameter(CParameter::WindowLog(MAX_WINDOW_LOG + 2)).expect("param");
        let mut scratch = vec![0u8; 1 << 16];
        let data: Vec<u8> =
            (0..(3u32 << 20)).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mut wire = Vec::new();
        let mut input = InBuffer::around(&data[..]);
        while input.pos() < data.len() {
            let mut output = OutBuffer::around(&mut scratch[..]);
            big.run(&mut input, &mut output).expect("run");
            wire.extend_from_slice(output.as_slice());
        }
        let mut dec = Decompressor::new().expect("decoder");
        let mut out = vec![0u8; 1 << 16];
        assert!(dec.step(&wire, &mut out).is_err());
    }

    #[test]
    fn garbage_is_an_error() {
        let mut dec = Decompressor::new().expect("decoder");
        let mut out = [0u8; 64];
        assert!(dec.step(b"definitely not zstd", &mut out).is_err());
    }
}
