#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (cargo-fuzz, libFuzzer) for SECONDS each (default 60),
# on a stable toolchain (`--sanitizer none` needs no nightly), then replays each target's
# corpus through the real `routechain` binary to check its exit codes.
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 600        # 10 minutes per target
#   FUZZ_TARGETS="chain request" scripts/fuzz.sh 30
#
# Installs cargo-fuzz (`cargo install cargo-fuzz --locked`) when it is missing. The committed
# seed corpus (fuzz/corpus/<target>/) is read, never written: what libFuzzer finds goes to
# target/fuzz-corpus/<target>/ (kept between runs); a crash is written to
# fuzz/artifacts/<target>/ and fails the script with its reproducer command.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-60}"
TARGETS="${FUZZ_TARGETS:-chain condition provider_url request}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz (once: cargo install keeps it in ~/.cargo/bin)"
  cargo install cargo-fuzz --locked
fi

# The fuzz crate is outside the workspace (its own Cargo.lock and fuzz/target/); one build
# of every target, instrumented for coverage, without a sanitizer (stable toolchain).
(cd fuzz && cargo fuzz build --sanitizer none --release)

mkdir -p target/fuzz-logs
for t in $TARGETS; do
  echo "== fuzz $t for ${SECONDS_PER_TARGET}s"
  work="$PWD/target/fuzz-corpus/$t"
  log="$PWD/target/fuzz-logs/$t.log"
  mkdir -p "$work"
  # -timeout: one input taking over 10 s is a hang (super-linear time), reported as a crash;
  # -rss_limit_mb: one input taking over 2 GB is a memory blow-up. The whole output goes to
  # target/fuzz-logs/<target>.log; shown: the final stats, or on a crash the panic and the
  # reproducer.
  if (cd fuzz && cargo fuzz run --sanitizer none --release "$t" "$work" "corpus/$t" -- \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1) >"$log" 2>&1; then
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$log" || true
  else
    echo "fuzz target $t failed; the input is in fuzz/artifacts/$t/ (full log: $log):" >&2
    grep -E -A 12 "panicked at|ERROR: libFuzzer|SUMMARY|Test unit written|timeout after|out-of-memory" "$log" \
      | grep -v '^INFO' | head -n 60 >&2
    echo "reproduce: cd fuzz && cargo fuzz run --sanitizer none $t artifacts/$t/<file>" >&2
    exit 1
  fi
done

# The real binary: `check` exits 0 (valid) or 2 (problems) on any chain file, never
# anything else (a panic is 101); `route` exits 0, 2 or 3 on any request.
echo "== replaying the corpora through the routechain binary"
cargo build --quiet -p routechain-cli
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/routechain"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
printf 'routers:\n  - type: tag\n  - type: condition\n    rule:\n      conditions: ["method = get* => region = hz"]\n' \
  > "$scratch/chain.yaml"
printf 'dubbo://10.0.0.1:20880/s?region=hz\ndubbo://10.0.0.2:20880/s?region=bj\n' > "$scratch/providers.txt"
failed=0
replay() { # CMD... ; expected codes in $ok
  local code=0
  timeout 20 "$@" >/dev/null 2>"$scratch/stderr" || code=$?
  if [[ " $ok " != *" $code "* ]]; then
    echo "exit $code (expected one of $ok): $*" >&2
    head -c 2000 "$scratch/stderr" >&2
    failed=1
  fi
}
n=0
for f in fuzz/corpus/chain/* target/fuzz-corpus/chain/*; do
  [[ -f "$f" ]] || continue
  n=$((n + 1)); [[ $n -le 300 ]] || break
  cp "$f" "$scratch/fuzz.chain.yaml"
  ok="0 2" replay "$bin" check "$scratch/fuzz.chain.yaml"
done
n=0
for f in fuzz/corpus/request/* target/fuzz-corpus/request/*; do
  [[ -f "$f" ]] || continue
  n=$((n + 1)); [[ $n -le 300 ]] || break
  ok="0 2 3" replay "$bin" route --chain "$scratch/chain.yaml" \
    --providers "$scratch/providers.txt" --request "$f"
done
n=0
for f in fuzz/corpus/provider_url/* target/fuzz-corpus/provider_url/*; do
  [[ -f "$f" ]] || continue
  n=$((n + 1)); [[ $n -le 300 ]] || break
  ok="0 2 3" replay "$bin" route --chain "$scratch/chain.yaml" --providers "$f" \
    --request rules/examples/request.json
done
exit "$failed"
