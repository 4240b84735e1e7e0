#!/usr/bin/env bash
# The vecplane demo on a fresh Debian 12 machine with Rust (rustup) installed: installs the tools
# the demo drives (iproute2, ping, iperf3, ethtool), builds the release binary, and runs
# `vecplane demo` as root (and installs the binary as /usr/local/bin/vecplane, the `vecplane` of
# README's tour): namespaces A - R - B with vecplane routing IPv4/IPv6 in R, a bounded
# burst of real traffic (ping, iperf3 TCP and UDP) with per-port rates every second, then
# `show runtime`; everything it creates is deleted at the end, on Ctrl-C and on errors.
# Arguments are passed on to `vecplane demo` (e.g. --seconds 10 --driver af-packet); with --vms
# it also installs what the two QEMU guests are built from and run with (qemu-system-x86,
# linux-image-amd64, busybox-static, xz-utils, cpio, file).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
need_apt=()
pkgs=(iproute2 iputils-ping iperf3 ethtool)
for arg in "$@"; do
  if [ "$arg" = --vms ]; then
    pkgs+=(qemu-system-x86 linux-image-amd64 busybox-static xz-utils cpio file)
  fi
done
for pkg in "${pkgs[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing ${need_apt[*]}"
  $SUDO apt-get update -qq
  # iperf3 asks whether to start a daemon at boot; answer no.
  echo "iperf3 iperf3/start_daemon boolean false" | $SUDO debconf-set-selections 2>/dev/null || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

echo "== cargo build --release -p vecplane"
cargo build --release -p vecplane
bin="${CARGO_TARGET_DIR:-target}/release/vecplane"
# The README's tour runs a bare `vecplane`: put the binary just built on PATH (the same file
# `cargo install --path vecplane --root /usr/local` would put there, without building it again).
echo "== installing $bin as /usr/local/bin/vecplane"
$SUDO install -m 0755 "$bin" /usr/local/bin/vecplane

echo "== $bin demo $*"
$SUDO "$bin" demo "$@"
