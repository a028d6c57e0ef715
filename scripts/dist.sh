#!/usr/bin/env bash
# Static, stripped soku binaries for Linux: dist/soku-<target> and dist/SHA256SUMS.
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

(cd dist && sha256sum soku-* >SHA256SUMS)
for target in "${targets[@]}"; do
    printf '%s: %s bytes\n' "dist/soku-$target" "$(stat -c %s "dist/soku-$target")"
done
