#!/usr/bin/env bash
# Run every cargo-fuzz target of fuzz/ for a bounded time; exit non-zero on a crash.
#
#   scripts/fuzz.sh [TOTAL_SECONDS]      (default 60: split evenly over the targets)
#   FUZZ_TARGETS="graph_input" scripts/fuzz.sh 600
#
# Needs the nightly toolchain (installed here for cargo-fuzz); installs cargo-fuzz from crates.io
# when it is missing. The corpora (fuzz/corpus/<target>) are seeded from tests/golden first.
# A crash leaves its input in fuzz/artifacts/<target>/; reproduce it with
#   cargo +nightly fuzz run <target> fuzz/artifacts/<target>/crash-...
set -euo pipefail

total="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/fuzz"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz from crates.io"
    cargo install cargo-fuzz --locked
fi

python="$(command -v python3 || command -v /usr/bin/python3)"
"$python" "$root/scripts/fuzz_seeds.py" "$root/fuzz"

targets="$(echo ${FUZZ_TARGETS:-$(cargo +nightly fuzz list)})"
count=$(echo "$targets" | wc -w)
each=$(( total / count ))
(( each >= 1 )) || each=1

status=0
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for t in $targets; do
    echo "=== fuzz target $t for ${each}s"
    # -rss_limit_mb: the router builds a 32 MiB FIB and a buffer pool once; stay well above.
    if cargo +nightly fuzz run "$t" -- -max_total_time="$each" -rss_limit_mb=4096 \
        -print_final_stats=1 >"$log" 2>&1; then
        tail -n 12 "$log"
    else
        tail -n 60 "$log"
        echo "fuzz.sh: target $t FAILED; its failing input is in fuzz/artifacts/$t/" >&2
        status=1
    fi
done
if [ "$status" = 0 ]; then
    echo "fuzz.sh: no crash in ${total}s over: $targets"
else
    echo "fuzz.sh: FAILED (see above)" >&2
fi
exit "$status"
