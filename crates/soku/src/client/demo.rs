//! `soku demo`: soku's main job with no remote host. It writes a file of random bytes,
//! copies it through a local `soku serve` over QUIC on loopback (exactly the code path of
//! a real copy, minus ssh; `--transport tcp` takes TLS over TCP), shows the progress and summary, and checks the copy.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context as _;

use crate::cli::args::{CopyArgs, DemoArgs};
use crate::cli::transport_mode::TransportMode;
use crate::ui::{human_bytes, ProgressMeter};
use soku_engine::events::EventSink;

/// Runs the demo.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("soku-demo-").tempdir()?;
    let source = dir.path().join("demo.bin");
    let target = dir.path().join("received");
    std::fs::create_dir(&target)?;
    let bytes = args.size_mib.saturating_mul(1 << 20);
    crate::ui::say(&format!(
        "soku demo: writing {} of random data to {}",
        human_bytes(bytes),
        source.display()
    ));
    let expected = {
        let source = source.clone();
        tokio::task::spawn_blocking(move || write_random(&source, bytes)).await??
    };
    let mode = if args.force_ssh_channel { TransportMode::Ssh } else { args.transport };
    let how = match mode {
        TransportMode::Ssh => "the control channel (fallback path)",
        TransportMode::Tcp => "TLS over TCP on loopback",
        TransportMode::Auto | TransportMode::Quic => "QUIC on loopback",
    };
    crate::ui::say(&format!("soku demo: copying it through a local `soku serve` over {how}"));
    let copy = CopyArgs {
        paths: vec![source.into_os_string(), target.clone().into_os_string()],
        transport: Some(mode),
        verbose: 1,
        ..CopyArgs::default()
    };
    let events: Arc<dyn EventSink> = Arc::new(ProgressMeter::new(false, true));
    let report = crate::client::copy::run_with(copy, events).await?;
    if report.bytes != bytes || report.files != 1 {
        anyhow::bail!(
            "the receiver verified {} bytes in {} files, expected {bytes} in 1",
            report.bytes,
            report.files
        );
    }
    let copied = target.join("demo.bin");
    let actual = {
        let copied = copied.clone();
        tokio::task::spawn_blocking(move || hash_file(&copied)).await??
    };
    if actual != expected {
        anyhow::bail!("the copy differs from the source: this is a bug, please report it");
    }
    crate::ui::say(&format!(
        "soku demo: {} matches the source (BLAKE3 {})",
        copied.display(),
        &actual.to_hex()[..16]
    ));
    Ok(())
}

/// Writes `len` pseudo-random bytes (BLAKE3 in XOF mode: fast and incompressible) and
/// returns their hash.
fn write_random(path: &std::path::Path, len: u64) -> anyhow::Result<blake3::Hash> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut xof = blake3::Hasher::new_derive_key("soku demo data").finalize_xof();
    let mut hasher = blake3::Hasher::new();
    let mut block = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        xof.fill(&mut block[..n]);
        hasher.update(&block[..n]);
        out.write_all(&block[..n])?;
        left -= n as u64;
    }
    out.flush()?;
    Ok(hasher.finalize())
}

fn hash_file(path: &std::path::Path) -> anyhow::Result<blake3::Hash> {
    let mut hasher = blake3::Hasher::new();
    hasher
        .update_reader(std::fs::File::open(path).with_context(|| format!("{}", path.display()))?)?;
    Ok(hasher.finalize())
}
