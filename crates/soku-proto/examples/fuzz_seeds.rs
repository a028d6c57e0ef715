//! Writes the seed corpus of every fuzz target (see `fuzz/README.md`):
//! `cargo run -p soku-proto --example fuzz_seeds -- fuzz/corpus`.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus".into()));
    for (target, _) in soku_proto::fuzzing::TARGETS {
        let dir = out.join(target);
        std::fs::create_dir_all(&dir)?;
        let seeds = soku_proto::fuzzing::seeds(target);
        for (n, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{n:02}")), seed)?;
        }
        println!("{}: {} seeds", dir.display(), seeds.len());
    }
    Ok(())
}
