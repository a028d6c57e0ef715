//! `--report`: real copies over loopback QUIC (sshd, `soku serve`) write the page, and a
//! real headless Chromium renders it: the screenshot is the expected size and not blank,
//! and the rendered DOM holds the charts and the file table, with a hostile file name
//! as text, never as markup.
//!
//! The browser is `chromium-headless-shell` or `chromium` (Debian packages;
//! `scripts/test.sh` installs the first), or the program in `SOKU_CHROMIUM`. Without
//! one the test fails, unless `SOKU_SKIP_BROWSER=1` says to skip the browser part.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{self, data, write, Env};

/// The window the page is rendered in: as wide as a laptop's browser, tall enough for
/// every section.
const WIDTH: u32 = 1000;
const HEIGHT: u32 = 2600;

/// A name a page must show as text: a directory `<script>alert(1)<` holding a file
/// `script>`, whose path reads `<script>alert(1)</script>` (a file name cannot hold
/// the slash itself).
const HOSTILE_DIR: &str = "<script>alert(1)<";
const HOSTILE_FILE: &str = "script>";

/// The browser to render with, or `None` when the environment says to skip it.
fn browser() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SOKU_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    for name in ["chromium-headless-shell", "chromium"] {
        for dir in ["/usr/bin", "/usr/local/bin"] {
            let path = Path::new(dir).join(name);
            if path.exists() {
                return Some(path);
            }
        }
    }
    if std::env::var("SOKU_SKIP_BROWSER").is_ok_and(|v| v == "1") {
        eprintln!("report_e2e: no Chromium, and SOKU_SKIP_BROWSER=1: browser checks skipped");
        return None;
    }
    panic!(
        "no headless Chromium: install the Debian package chromium-headless-shell (as \
         scripts/test.sh does), point SOKU_CHROMIUM at one, or set SOKU_SKIP_BROWSER=1"
    );
}

/// `chromium ARGS file://PAGE`, bounded; its output.
fn render(browser: &Path, page: &Path, args: &[String]) -> std::process::Output {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "90"])
        .arg(browser)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars"])
        // No first-run work, no network: the page needs none (it is self-contained).
        .args(["--no-first-run", "--disable-extensions", "--mute-audio"])
        .args(args)
        .arg(format!("file://{}", page.display()));
    let out = soku_testkit::cmd::output_within(&mut cmd, Duration::from_secs(100));
    assert!(out.status.success(), "{}", soku_testkit::describe(&cmd, &out));
    out
}

/// A source tree: one file large enough for several path samples under `-l`, a few
/// small ones, and the hostile name.
fn tree(env: &Env) -> PathBuf {
    let root = env.src().join("tree");
    write(&root.join("big.bin"), &data(24 << 20, 1));
    for i in 0..5 {
        write(&root.join(format!("small-{i}.txt")), &data(1000 + i, 2 + i as u64));
    }
    write(&root.join(HOSTILE_DIR).join(HOSTILE_FILE), b"x");
    root
}

/// Catches: a page that does not render (bad markup, a resource it waits for), charts
/// or the file table missing from the rendered DOM, a file name rendered as markup, a
/// blank or one-colour screenshot.
#[test]
fn the_report_renders_in_a_real_browser() {
    let env = Env::new();
    let src = tree(&env);
    let page = env.path("report.html");
    // -l 80 Mbit/s: a copy of ~3 s, with a handful of path samples.
    env.ok(env
        .soku()
        .args(["-r", "-q", "-l", "80000", "--report"])
        .arg(&page)
        .arg(&src)
        .arg(env.remote(&env.dst())));
    let html = std::fs::read_to_string(&page).expect("the report was written");
    assert!(!html.contains("<script"), "a script element in the page");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the hostile name");
    // The server's summary came back: its CPU row.
    assert!(html.contains("remote (soku serve)"), "no server CPU row");

    let Some(browser) = browser() else { return };
    let shot = env.path("report.png");
    render(
        &browser,
        &page,
        &[format!("--screenshot={}", shot.display()), format!("--window-size={WIDTH},{HEIGHT}")],
    );
    // Kept for a person to look at.
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report_e2e.png");
    let _ = std::fs::copy(&shot, &kept);
    eprintln!("report_e2e: screenshot at {}", kept.display());
    check_screenshot(&shot);

    let dom = render(&browser, &page, &["--dump-dom".to_string()]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.matches("<svg").count() >= 4, "fewer than four charts in the DOM:\n{dom}");
    assert!(dom.contains("<path d=\"M"), "no chart line in the DOM");
    assert!(dom.contains("<table") && dom.contains("small-4.txt"), "no file table");
    // The browser parsed the name as text: it serialises it escaped, never as an element.
    assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the hostile name");
    assert!(!dom.contains("<script"), "a script element in the rendered DOM");
}

/// The screenshot is the window's size, mostly drawn on (not a white page), and holds
/// the charts' colours.
fn check_screenshot(shot: &Path) {
    let file = std::fs::File::open(shot).expect("the screenshot exists");
    let mut reader = png::Decoder::new(std::io::BufReader::new(file)).read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("one frame");
    assert_eq!((info.width, info.height), (WIDTH, HEIGHT), "screenshot size");
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected colour type {other:?}"),
    };
    let pixels: Vec<[u8; 3]> =
        buf[..info.buffer_size()].chunks(channels).map(|p| [p[0], p[1], p[2]]).collect();
    let total = pixels.len() as f64;
    let white = pixels.iter().filter(|p| p.iter().all(|c| *c >= 250)).count() as f64;
    // Ink: text, lines and bars, far from both white and the page's light grey.
    let ink = pixels.iter().filter(|p| p.iter().any(|c| *c < 200)).count() as f64;
    // Saturated colours, in 16 levels per channel: the charts' lines and phase bands.
    let mut colours = std::collections::HashMap::new();
    for p in &pixels {
        let (lo, hi) = (p.iter().min().copied().unwrap_or(0), p.iter().max().copied().unwrap_or(0));
        if hi - lo > 60 {
            *colours.entry([p[0] >> 4, p[1] >> 4, p[2] >> 4]).or_insert(0u32) += 1;
        }
    }
    let distinct = colours.values().filter(|n| **n >= 40).count();
    eprintln!(
        "report_e2e: {:.1} % white, {:.2} % ink, {distinct} saturated colours",
        white * 100.0 / total,
        ink * 100.0 / total
    );
    assert!(white / total < 0.9, "the screenshot is mostly white: {:.1} %", white * 100.0 / total);
    assert!(ink / total > 0.01, "almost nothing drawn: {:.2} % ink", ink * 100.0 / total);
    assert!(distinct >= 4, "only {distinct} saturated colours: charts missing? {colours:?}");
}

/// Catches: a download's report without the data sender's figures (the server's
/// summary lost or not read), or without the server's CPU.
#[test]
fn a_download_report_has_the_servers_window_and_cpu() {
    let env = Env::new();
    let src = env.src().join("down.bin");
    write(&src, &data(16 << 20, 9));
    let page = env.path("down.html");
    env.ok(env
        .soku()
        .args(["-q", "-l", "80000", "--report"])
        .arg(&page)
        .arg(env.remote(&src))
        .arg(env.dst()));
    let html = std::fs::read_to_string(&page).expect("the report was written");
    assert!(html.contains("remote (soku serve)</td><td>sender"), "no server CPU row");
    assert!(html.contains("Congestion window and soku-cc"), "no window chart from the server");
    assert!(html.contains("Loss of the data sender"), "no loss chart from the server");
    assert!(html.contains("down.bin"), "no file row");
}

/// Catches: a report asked into a directory that does not exist found out only after
/// the copy (or never).
#[test]
fn a_report_into_a_missing_directory_is_refused_before_the_copy() {
    let env = Env::new();
    let src = env.src().join("a.bin");
    write(&src, b"abc");
    let page = env.path("no/such/dir/r.html");
    let err = common::fails_with(
        env.soku().arg("--report").arg(&page).arg(&src).arg(env.remote(&env.dst())),
        2,
        &["--report", "no such directory"],
    );
    assert!(!env.dst().join("a.bin").exists(), "copied anyway: {err}");
}

/// Catches: a report that breaks (or claims QUIC's figures) when the data went over
/// TLS/TCP or the ssh channel: over TCP the server still sends its CPU; over the ssh
/// channel, which carries the data itself, it sends nothing and the page says so.
#[test]
fn reports_over_tcp_and_the_ssh_channel() {
    let env = Env::new();
    let src = env.src().join("t.bin");
    write(&src, &data(3 << 20, 4));
    for (how, server_row) in [("tcp", true), ("ssh", false)] {
        let page = env.path(&format!("{how}.html"));
        env.ok(env
            .soku()
            .args(["-q", "--transport", how, "--report"])
            .arg(&page)
            .arg(&src)
            .arg(env.remote(&env.dst())));
        let html = std::fs::read_to_string(&page).expect("the report was written");
        assert!(html.contains("No path samples"), "{how}: QUIC figures claimed");
        assert_eq!(html.contains("remote (soku serve)"), server_row, "{how}: server CPU row");
        assert!(html.contains("t.bin"), "{how}: no file row");
        assert!(!html.contains("Loss of the data sender"), "{how}: a loss chart");
    }
}
