use std::ops::RangeInclusive;

use super::*;
use crate::{ProtoError, MAGIC, PROTOCOL_VERSIONS};
use serde::{Deserialize, Serialize};

#[test]
fn client_hellos_with_and_without_a_path_memory_decode() {
    let mut hello = ClientHello::new([3; 32], true);
    hello.path_memory = Some(PathMemory { bandwidth_bps: 95_000_000, min_rtt_us: 200_000 });
    let new = postcard::to_allocvec(&hello).expect("encodes");
    assert_eq!(decode_client_hello(&new).expect("decodes"), hello);
    // A protocol-5 client's hello: the same fields without the memory.
    let old = postcard::to_allocvec(&(1u16, hello.max_version, [3u8; 32], true)).expect("encodes");
    let decoded = decode_client_hello(&old).expect("decodes");
    assert_eq!(decoded, ClientHello { path_memory: None, min_version: 1, ..hello.clone() });
    // A client from before `background`: the memory, then the end.
    let mid = postcard::to_allocvec(&(1u16, hello.max_version, [3u8; 32], true, hello.path_memory))
        .expect("encodes");
    assert_eq!(
        decode_client_hello(&mid).expect("decodes"),
        ClientHello { min_version: 1, ..hello.clone() }
    );
    let mut background = hello.clone();
    background.background = true;
    let bytes = postcard::to_allocvec(&background).expect("encodes");
    assert_eq!(decode_client_hello(&bytes).expect("decodes"), background);
    // A client from before `diagnose`: background, then the end.
    let pre_diagnose =
        postcard::to_allocvec(&(1u16, hello.max_version, [3u8; 32], true, hello.path_memory, true))
            .expect("encodes");
    assert_eq!(decode_client_hello(&pre_diagnose).expect("decodes"), {
        let mut want = background.clone();
        want.min_version = 1;
        want
    });
    let mut diagnose = hello.clone();
    diagnose.diagnose = true;
    let bytes = postcard::to_allocvec(&diagnose).expect("encodes");
    assert_eq!(decode_client_hello(&bytes).expect("decodes"), diagnose);
    // A newer client's additions after the memory are ignored.
    let mut newer = new.clone();
    newer.extend_from_slice(&[1, 2, 3]);
    assert_eq!(decode_client_hello(&newer).expect("decodes"), hello);
    assert!(decode_client_hello(&old[..10]).is_err());
    // Since protocol 6, the receive preview; a client from before ends after
    // `diagnose`.
    for preview in [
        ReceivePreview::upload("dst/", 2, vec!["a".into(), "b c".into()]),
        Some(ReceivePreview::NothingHeld),
    ] {
        let mut previewing = hello.clone();
        previewing.receive_preview = preview;
        let bytes = postcard::to_allocvec(&previewing).expect("encodes");
        assert_eq!(decode_client_hello(&bytes).expect("decodes"), previewing);
    }
    let pre_preview = postcard::to_allocvec(&(
        1u16,
        hello.max_version,
        [3u8; 32],
        true,
        hello.path_memory,
        false,
        true,
    ))
    .expect("encodes");
    let decoded = decode_client_hello(&pre_preview).expect("decodes");
    assert_eq!(decoded.receive_preview, None);
    assert!(decoded.diagnose);
    // Since protocol 7, `keep`; a client from before ends after the preview.
    let mut keeping = hello.clone();
    keeping.keep = true;
    let bytes = postcard::to_allocvec(&keeping).expect("encodes");
    assert_eq!(decode_client_hello(&bytes).expect("decodes"), keeping);
    let mut pre_keep = bytes.clone();
    assert_eq!(pre_keep.pop(), Some(0), "no open-file limit is the last byte");
    assert_eq!(pre_keep.pop(), Some(1), "keep is the one before");
    assert!(!decode_client_hello(&pre_keep).expect("decodes").keep);
}

/// Catches: a receiver's open-file limit lost on the way, or a peer from before it
/// (whose hello or opening ends sooner) refused instead of taken as not telling.
#[test]
fn the_open_file_limit_round_trips_and_older_hellos_lack_it() {
    let mut hello = ClientHello::new([3; 32], true);
    hello.keep = true;
    hello.open_files = Some(256);
    let bytes = postcard::to_allocvec(&hello).expect("encodes");
    assert_eq!(decode_client_hello(&bytes).expect("decodes"), hello);
    let mut newer = bytes.clone();
    newer.extend_from_slice(&[9, 9]);
    assert_eq!(decode_client_hello(&newer).expect("a newer client's"), hello);
    // A client from before the limit: its hello ends after `keep`.
    let old =
        postcard::to_allocvec(&ClientHello { open_files: None, ..hello.clone() }).expect("encodes");
    let old = &old[..old.len() - 1];
    assert_eq!(old.last(), Some(&1), "keep is the last byte");
    let decoded = decode_client_hello(old).expect("decodes");
    assert_eq!(decoded, ClientHello { open_files: None, ..hello.clone() });

    let mut server = server_hello(5..=7);
    let ServerHello::Ready { open_files, .. } = &mut server;
    *open_files = Some(u64::MAX);
    let bytes = postcard::to_allocvec(&server).expect("encodes");
    assert_eq!(decode_server_hello(&bytes), Ok(server.clone()));
    let mut newer = bytes.clone();
    newer.extend_from_slice(&[1, 2, 3]);
    assert_eq!(decode_server_hello(&newer), Ok(server.clone()));
    // A server from before the limit: its hello ends after `tcp_port`.
    let old = postcard::to_allocvec(&server_hello(5..=7)).expect("encodes");
    let old = &old[..old.len() - 1];
    assert_eq!(old.last(), Some(&2), "tcp_port is the last byte");
    assert_eq!(decode_server_hello(old), Ok(server_hello(5..=7)));
    assert!(decode_server_hello(&old[..old.len() - 1]).is_err(), "cut inside the fields");

    let opening =
        KeptOpening { receive_preview: Some(ReceivePreview::NothingHeld), open_files: Some(1024) };
    let bytes = postcard::to_allocvec(&opening).expect("encodes");
    assert_eq!(decode_kept_opening(&bytes), Ok(opening.clone()));
    // A client from before the limit: its opening is the preview alone.
    for preview in [None, Some(ReceivePreview::NothingHeld)] {
        let old = postcard::to_allocvec(&preview).expect("encodes");
        let want = KeptOpening { receive_preview: preview, open_files: None };
        assert_eq!(decode_kept_opening(&old), Ok(want));
    }
    assert!(decode_kept_opening(&[]).is_err());
}

/// Catches: a preview that makes the hello larger than a server from before
/// protocol 6 reads (4096 bytes): such a preview is not made.
#[test]
fn an_upload_preview_keeps_the_hello_small_enough_for_older_servers() {
    let names = |n: usize| (0..n).map(|i| format!("{i:0>250}")).collect::<Vec<_>>();
    let mut hello = ClientHello::new([3; 32], true);
    hello.path_memory = Some(PathMemory { bandwidth_bps: u64::MAX, min_rtt_us: u64::MAX });
    hello.open_files = Some(u64::MAX);
    hello.receive_preview = ReceivePreview::upload(&"t".repeat(1000), 2, names(8));
    assert!(hello.receive_preview.is_some(), "1000 + 8 x 252 bytes fit");
    assert!(postcard::to_allocvec(&hello).expect("encodes").len() <= 4096);
    assert_eq!(ReceivePreview::upload(&"t".repeat(1000), 9, names(9)), None);
    assert_eq!(ReceivePreview::upload("t", 100, names(100)), None);
}

/// Catches: a summary note that an older client could not skip, or that a newer
/// server's additions would break.
#[test]
fn a_summary_note_round_trips_and_older_readers_skip_it() {
    let note = ServerNote::Summary(ServerSummary {
        cpu_us: 1_500_000,
        wall_us: 9_000_000,
        sent_data: true,
        samples: vec![PathPoint {
            at_ms: 500,
            rtt_us: 50_100,
            min_rtt_us: 50_000,
            sent_packets: 9000,
            lost_packets: 45,
            cwnd: 1 << 20,
            bandwidth_bps: 95_000_000,
            phase: "probe_bw".into(),
        }],
    });
    let mut bytes = postcard::to_allocvec(&note).expect("encodes");
    assert_eq!(decode_hello::<ServerNote>(&bytes).expect("decodes"), note);
    bytes.extend_from_slice(&[7, 7, 7]);
    assert_eq!(decode_hello::<ServerNote>(&bytes).expect("a newer server's"), note);
    /// The note as a client from before the summary knew it.
    #[derive(Debug, Deserialize)]
    enum OldNote {
        Policed { _why: String },
    }
    assert!(decode_hello::<OldNote>(&bytes).is_err());
    let policed = postcard::to_allocvec(&ServerNote::Policed { why: "x".into() }).expect("ok");
    assert!(decode_hello::<OldNote>(&policed).is_ok());
}

#[test]
fn login_noise_before_the_hello_is_skipped() {
    let mut wire = b"Welcome to host!\nlast login: yesterday\n".to_vec();
    wire.extend_from_slice(MAGIC);
    wire.extend_from_slice(b"frames");
    let mut scanner = HelloScanner::default();
    let mut result = Scan::NeedMore;
    for piece in wire.chunks(5) {
        result = scanner.feed(piece).expect("within limit");
        if result != Scan::NeedMore {
            break;
        }
    }
    let Scan::Found { noise, mut rest } = result else { panic!("magic not found") };
    assert_eq!(noise, b"Welcome to host!\nlast login: yesterday\n");
    // Bytes after the magic in the same piece are kept.
    rest.extend_from_slice(&wire[wire.len() - (b"frames".len() - rest.len())..]);
    assert_eq!(rest, b"frames");
}

#[test]
fn endless_noise_is_an_error() {
    let mut scanner = HelloScanner::default();
    let block = vec![b'x'; 64 * 1024];
    let mut last = Ok(Scan::NeedMore);
    for _ in 0..20 {
        last = scanner.feed(&block);
        if last.is_err() {
            break;
        }
    }
    assert_eq!(last, Err(ProtoError::NoHello(MAX_NOISE)));
}

fn server_hello(versions: RangeInclusive<u16>) -> ServerHello {
    ServerHello::Ready {
        version: *versions.end(),
        udp_port: 1,
        server_addr: None,
        fingerprint: [7; 32],
        soku_version: "x".into(),
        warnings: vec!["w".into()],
        min_version: *versions.start(),
        tcp_port: 2,
        open_files: None,
    }
}

/// An older build (speaking 3) and a newer one (speaking 3-4) agree on 3, whichever
/// of them is the client: each side's choice from the other's hello is the same.
#[test]
fn an_older_and_a_newer_build_agree_on_the_newest_common_version() {
    for (client, server) in [(3..=3, 3..=4), (3..=4, 3..=3), (2..=5, 4..=7)] {
        let hello = ClientHello::speaking(client.clone(), [0; 32], true);
        let server_side = negotiate(server.clone(), hello.versions(), "the client");
        let client_side =
            negotiate(client.clone(), server_hello(server).versions(), "the remote host");
        assert_eq!(server_side, client_side);
    }
    assert_eq!(negotiate(3..=3, 3..=4, "the client"), Ok(3));
    assert_eq!(negotiate(2..=5, 4..=7, "the client"), Ok(5));
}

#[test]
fn no_common_version_names_both_and_the_side_to_upgrade() {
    let old_remote = negotiate(5..=6, 3..=4, "the remote host").unwrap_err().to_string();
    assert_eq!(
        old_remote,
        "soku on the remote host speaks protocol version 3-4, this soku speaks 5-6: \
         upgrade soku on the remote host (or install the same soku version on both)"
    );
    let old_here = negotiate(3..=3, 4..=4, "the client").unwrap_err().to_string();
    assert!(
        old_here
            .contains("speaks protocol version 4, this soku speaks 3: upgrade soku on this host"),
        "{old_here}"
    );
}

#[test]
fn a_newer_hello_with_fields_appended_still_decodes() {
    let hello = server_hello(3..=9);
    let mut payload = postcard::to_stdvec(&hello).unwrap();
    payload.extend_from_slice(&[1, 2, 3, 4]);
    assert_eq!(decode_server_hello(&payload), Ok(hello));
    let client = ClientHello::speaking(3..=9, [1; 32], false);
    let mut payload = postcard::to_stdvec(&client).unwrap();
    payload.push(42);
    assert_eq!(decode_hello::<ClientHello>(&payload), Ok(client));
}

/// Protocol 4's hello (no TCP port) is refused with both versions named.
#[test]
fn a_protocol_4_server_is_told_to_upgrade() {
    #[derive(Serialize)]
    enum V4 {
        Ready {
            version: u16,
            udp_port: u16,
            server_addr: Option<std::net::IpAddr>,
            fingerprint: [u8; 32],
            soku_version: String,
            warnings: Vec<String>,
            min_version: u16,
        },
    }
    let old = V4::Ready {
        version: 4,
        udp_port: 9,
        server_addr: None,
        fingerprint: [0; 32],
        soku_version: "0.1.0".into(),
        warnings: vec![],
        min_version: 4,
    };
    let payload = postcard::to_stdvec(&old).unwrap();
    let message = decode_server_hello(&payload).unwrap_err().to_string();
    assert!(
        message.contains("remote host speaks protocol version 4")
            && message.contains("upgrade soku on the remote host"),
        "{message}"
    );
}

#[test]
fn a_tcp_preface_round_trips_and_nonsense_is_refused() {
    for (index, lanes) in [(0, 1), (0, 4), (4, 4), (1, 255)] {
        let preface = TcpPreface { index, lanes };
        assert_eq!(TcpPreface::from_bytes(preface.to_bytes()), Ok(preface));
    }
    for bad in [[0, 0], [5, 4], [255, 1]] {
        assert!(TcpPreface::from_bytes(bad).is_err(), "{bad:?}");
    }
}

/// Protocol 2's hello (no oldest version) is refused with both versions named.
#[test]
fn a_protocol_2_server_is_told_to_upgrade() {
    #[derive(Serialize)]
    enum V2 {
        Ready {
            version: u16,
            udp_port: u16,
            server_addr: Option<std::net::IpAddr>,
            fingerprint: [u8; 32],
            soku_version: String,
            warnings: Vec<String>,
        },
    }
    let old = V2::Ready {
        version: 2,
        udp_port: 9,
        server_addr: None,
        fingerprint: [0; 32],
        soku_version: "0.1.0".into(),
        warnings: vec![],
    };
    let payload = postcard::to_stdvec(&old).unwrap();
    let message = decode_server_hello(&payload).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!(
            "soku on the remote host speaks protocol version 2, this soku speaks {}",
            PROTOCOL_VERSIONS.start()
        )),
        "{message}"
    );
    assert!(message.contains("upgrade soku on the remote host"), "{message}");
}
