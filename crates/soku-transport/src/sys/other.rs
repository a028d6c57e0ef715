//! macOS and Windows: no per-socket choice of congestion controller; the system's runs.

use socket2::SockRef;

/// The TCP advice soku gives names Linux's sysctls and modules; here the system tunes
/// its own buffers and controller, and there is nothing to tell the user.
pub(crate) const TCP_ADVICE_APPLIES: bool = false;

/// What [`congestion`] names where the system chooses.
const SYSTEMS: &str = "the system's";

/// Nothing to ask: the system's controller runs.
pub(crate) fn set_congestion(_socket: &SockRef<'_>, _name: &str) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "no per-socket congestion control on this system",
    ))
}

/// The system's controller, unnamed.
pub(crate) fn congestion(_socket: &SockRef<'_>) -> std::io::Result<String> {
    Ok(SYSTEMS.to_string())
}

/// No chronographs here (a socket's raw descriptor or handle, unused).
pub(crate) fn chronographs<H>(_socket: H) -> std::io::Result<(u64, u64)> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "no TCP chronographs"))
}
