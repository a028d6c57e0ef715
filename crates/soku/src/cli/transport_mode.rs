//! `--transport`: the data path the user asked for.

/// The data path the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportMode {
    /// QUIC; TLS over TCP if UDP does not get through; the ssh channel if TCP does not.
    #[default]
    Auto,
    /// QUIC only.
    Quic,
    /// TLS over TCP only.
    Tcp,
    /// The ssh channel itself (scp's speed).
    Ssh,
}

impl TransportMode {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TransportMode::Auto => "auto",
            TransportMode::Quic => "quic",
            TransportMode::Tcp => "tcp",
            TransportMode::Ssh => "ssh",
        }
    }
}
