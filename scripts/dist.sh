#!/usr/bin/env bash
# Static, stripped soku binaries for Linux: dist/soku-<target>, a Debian package of each
# (dist/soku_<version>_<arch>.deb: the binary, its man page and shell completions), and
# dist/SHA256SUMS.
#
#   ./scripts/dist.sh                      # x86_64 and aarch64
#   ./scripts/dist.sh x86_64-unknown-linux-musl
#
# Built against musl, so they run on any Linux of their architecture whatever its glibc
# (the glibc build needs 2.34 or newer). The C parts (ring, zstd, blake3, mimalloc) are
# compiled by `zig cc` through cargo-zigbuild: one cross compiler for every target, from
# PyPI and crates.io, where Debian has a musl gcc for the host only. The allocator is
# mimalloc either way (crates/soku/src/main.rs), so musl's malloc is never in the data
# path.
set -euo pipefail
cd "$(dirname "$0")/.."

ZIG_VERSION=0.17.1
ZIGBUILD_VERSION=0.24.1
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
fi

if ! python3 -m ziglang version >/dev/null 2>&1; then
    python3 -m pip install --quiet "ziglang==$ZIG_VERSION" ||
        python3 -m pip install --quiet --break-system-packages "ziglang==$ZIG_VERSION"
fi
if ! cargo zigbuild --help >/dev/null 2>&1; then
    cargo install --locked --quiet cargo-zigbuild --version "$ZIGBUILD_VERSION"
fi

mkdir -p dist
for target in "${targets[@]}"; do
    rustup target add "$target" >/dev/null
    cargo zigbuild --locked --profile dist --target "$target" -p soku
    cp "target/$target/dist/soku" "dist/soku-$target"
done

# The Debian packages, made with dpkg-deb from a staged tree: the package holds one
# static binary and three generated files, which needs no packaging tool beyond dpkg's.
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
runs_here="dist/soku-$(uname -m)-unknown-linux-musl"
for target in "${targets[@]}"; do
    case "$target" in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    *) continue ;;
    esac
    # The man page and completions come from a soku that runs on this machine.
    [ -x "$runs_here" ] || runs_here="dist/soku-$target"
    stage=$(mktemp -d)
    chmod 755 "$stage"
    install -D -m 755 "dist/soku-$target" "$stage/usr/bin/soku"
    mkdir -p "$stage/usr/share/man/man1" "$stage/DEBIAN"
    "$runs_here" man | gzip -9n >"$stage/usr/share/man/man1/soku.1.gz"
    "$runs_here" completions bash |
        install -D -m 644 /dev/stdin "$stage/usr/share/bash-completion/completions/soku"
    "$runs_here" completions zsh |
        install -D -m 644 /dev/stdin "$stage/usr/share/zsh/vendor-completions/_soku"
    "$runs_here" completions fish |
        install -D -m 644 /dev/stdin "$stage/usr/share/fish/vendor_completions.d/soku.fish"
    cat >"$stage/DEBIAN/control" <<CONTROL
Package: soku
Version: $version
Architecture: $arch
Maintainer: soku developers <soku@example.invalid>
Depends: openssh-client
Section: net
Priority: optional
Installed-Size: $(du -sk "$stage/usr" | cut -f1)
Description: fast, secure file transfer: scp's syntax, ssh's authentication, QUIC's speed
 soku copies files as scp does, logging in with the user's own ssh, and moves the data
 over QUIC with a congestion controller that holds the link's rate on long and lossy
 paths; verified end to end and resumable.
CONTROL
    dpkg-deb --root-owner-group --build "$stage" "dist/soku_${version}_$arch.deb" >/dev/null
    rm -rf "$stage"
done

(cd dist && sha256sum soku-* soku_*.deb >SHA256SUMS)
for file in dist/soku-* dist/soku_*.deb; do
    printf '%s: %s bytes\n' "$file" "$(stat -c %s "$file")"
done
