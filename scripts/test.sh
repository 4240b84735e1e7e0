#!/usr/bin/env bash
# The whole vecplane test suite, from a fresh Debian 12 machine with Rust (rustup) installed:
# installs what the tests need (apt packages, cargo components, cargo-fuzz), then runs format and
# lint checks, every unit/integration/golden test, and a bounded fuzz run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage is announced with the time since the start, so a slow stage shows in the log.
stage() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

need_apt=()
for pkg in python3-scapy bird2 tcpdump dpdk-dev iproute2 iputils-ping ethtool iperf3 curl prometheus nftables openvswitch-switch openvswitch-switch-dpdk nginx-light wrk qemu-system-x86 busybox-static linux-image-amd64 xz-utils cpio file tshark nfdump; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing ${need_apt[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
rustup component add clippy rustfmt >/dev/null 2>&1 || true

stage "cargo fmt"
cargo fmt --all -- --check
stage "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
stage "cargo test: every test binary, two at a time (scripts/run_tests.py), then the doc tests"
python3 scripts/run_tests.py
cargo test --workspace --doc
stage "concurrency: loom models of the epoch/publication protocol, the punt path's ring and bell, the IPFIX ring"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p vecplane-live --release --test loom
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p vecplane-channel --release --test loom
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p vecplane-ipfix --release --test loom
if cargo +nightly --version >/dev/null 2>&1; then
  stage "concurrency: AddressSanitizer (nightly) on readers racing writers (live snapshots, IPv4/IPv6 FIBs)"
  RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR=target/asan cargo +nightly test -q \
    --target x86_64-unknown-linux-gnu -p vecplane-live -p vecplane-fib -- racing readers_never stalled
elif [ "${CI:-}" = "true" ]; then
  echo "no nightly toolchain: the AddressSanitizer run cannot run in CI" >&2
  exit 1
fi
stage "fuzz (bounded)"
if cargo +nightly --version >/dev/null 2>&1; then
  scripts/fuzz.sh "${VECPLANE_FUZZ_SECONDS:-60}"
else
  echo "no nightly toolchain: cargo-fuzz skipped (the stable proptest fuzz of the same graph ran in cargo test)"
fi
stage "all stages passed"
