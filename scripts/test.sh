#!/usr/bin/env bash
# The whole vecplane test suite, from a fresh Debian 12 machine with Rust (rustup) installed:
# installs what the tests need (apt packages, cargo components, cargo-fuzz), then runs format and
# lint checks, every unit/integration/golden test, and a bounded fuzz run.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in python3-scapy tcpdump dpdk-dev iproute2 iputils-ping ethtool iperf3 curl prometheus nftables; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing ${need_apt[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
rustup component add clippy rustfmt >/dev/null 2>&1 || true

echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== fuzz (bounded)"
if cargo +nightly --version >/dev/null 2>&1; then
  scripts/fuzz.sh "${VECPLANE_FUZZ_SECONDS:-60}"
else
  echo "no nightly toolchain: cargo-fuzz skipped (the stable proptest fuzz of the same graph ran in cargo test)"
fi
