//! The client's and the server's bootstraps against each other in one process, over an
//! in-memory pipe in place of the ssh channel: the hellos, the transport choice, and a
//! real file copied on the data path they pick (QUIC on 127.0.0.1 when it gets through).

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use soku_engine::events::{EventSink, Silent};
use soku_engine::CopyOptions;
use soku_proto::message::CopyFlags;

use crate::cli::args::{Cli, Command, ServeArgs};
use crate::cli::transport_mode::TransportMode;
use crate::client::copy::{direction, drive};
use crate::client::session::{Session, SessionOptions};

/// `soku serve --bind 127.0.0.1`, as the command line gives it: the server listens on
/// loopback only.
fn serve_args() -> ServeArgs {
    match Cli::parse_from(["soku", "serve", "--bind", "127.0.0.1"]).command {
        Some(Command::Serve(args)) => args,
        other => panic!("not the serve command: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_and_a_server_in_one_process_copy_a_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("source.bin");
    let target = dir.path().join("received");
    std::fs::create_dir(&target).expect("target dir");
    // More than one chunk, and not a run of one byte that compression would hide.
    let data: Vec<u8> =
        (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(&source, &data).expect("source written");

    // The ssh channel: the client writes what the server reads, and back.
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let (server_input, server_output) = tokio::io::split(server_end);
    let (client_input, client_output) = tokio::io::split(client_end);

    let server = crate::server::serve::run(server_input, server_output, serve_args());
    let client = async {
        let opts = SessionOptions::for_command(
            TransportMode::Auto,
            "127.0.0.1".into(),
            Duration::from_secs(10),
        );
        let (session, mut link) =
            Session::over(client_input, client_output, &opts, &Silent).await?;
        let paths: Vec<OsString> = vec![source.clone().into(), target.clone().into()];
        let direction = direction(&paths)?;
        let flags = CopyFlags { resume: true, ..CopyFlags::NONE };
        let copy = CopyOptions {
            nothing_held: session.nothing_held(),
            byte_names: session.byte_names(),
            peer_open_files: session.peer_open_files(),
            ..CopyOptions::asked(flags)
        };
        let events: Arc<dyn EventSink> = Arc::new(Silent);
        let report = drive(&mut link, &direction, None, None, copy, None, events).await;
        session.close(link).await?;
        report
    };
    let bounded =
        tokio::time::timeout(Duration::from_secs(60), async { tokio::join!(server, client) });
    let (served, copied) = bounded.await.expect("the copy ends within a minute");
    let report = copied.expect("the client's copy succeeds");
    served.expect("the server's job succeeds");
    assert_eq!((report.files, report.bytes), (1, data.len() as u64));
    let arrived = std::fs::read(target.join("source.bin")).expect("the copy is there");
    assert!(arrived == data, "the copy differs from the source");
}
