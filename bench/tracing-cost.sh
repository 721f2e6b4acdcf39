#!/usr/bin/env bash
# What tracing costs per exchange, in CPU time: the shared cpu.sh (../shared/bench/cpu.sh: user + system
# time of every thread of the relay process, per request, after a warm-up) run twice on this checkout —
# once as it is, once with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a local sink (bench/otlp-sink.mjs, its
# own process, answering 200 to every export) — and the relay's rows side by side with the ratio.
#   npm run build && bash bench/tracing-cost.sh       (from the checkout's root; ~5 minutes a round)
# Knobs: those of cpu.sh (N, WARM, C, BODY_KB), ROUNDS (pairs, 1; 4 or more on a noisy machine), CPU_SH (where cpu.sh is),
# PORT_SHIFT (below), OTLP_PROTOCOL (http/protobuf),
# and any OTEL_* variable (passed to the traced relay).
set -u
checkout=$PWD
cpu_sh=${CPU_SH:-$(cd "$checkout/.." && pwd)/shared/bench/cpu.sh}
[ -f "$cpu_sh" ] || { echo "cpu.sh not found at $cpu_sh (set CPU_SH)"; exit 1; }
SINK_PORT=${OTLP_SINK_PORT:-18395}
tmp=$(mktemp -d); sink=
cleanup() { [ -n "$sink" ] && kill "$sink" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# cpu.sh listens on fixed ports (18380, 18383, 18390). When another run holds them (the machine is shared),
# PORT_SHIFT=N runs the very same script with each port moved up by N, its tools still taken from its own
# directory.
if [ -n "${PORT_SHIFT:-}" ]; then
  dir=$(cd "$(dirname "$cpu_sh")" && pwd)
  sed -e "s|^here=\$(cd \"\$(dirname \"\$0\")\" \&\& pwd)|here=$dir|" \
      -e "s|^UP=18380; BARE=18383; RELAY=18390|UP=$((18380 + PORT_SHIFT)); BARE=$((18383 + PORT_SHIFT)); RELAY=$((18390 + PORT_SHIFT))|" \
      "$cpu_sh" > "$tmp/cpu.sh"
  grep -q "^here=$dir" "$tmp/cpu.sh" && grep -q "^UP=$((18380 + PORT_SHIFT))" "$tmp/cpu.sh" || { echo "could not shift cpu.sh's ports"; exit 1; }
  cpu_sh=$tmp/cpu.sh
fi

OTLP_SINK_PORT=$SINK_PORT node "$checkout/bench/otlp-sink.mjs" >"$tmp/sink.log" 2>&1 &
sink=$!
for _ in $(seq 1 40); do grep -q port "$tmp/sink.log" 2>/dev/null && break; sleep 0.25; done

# ROUNDS pairs, so that a change in the machine's load falls on both sides alike: off then on in odd rounds,
# on then off in even ones (a machine that drifts within a pair then favours neither side).
off() {
  echo "round $round, tracing off: bash $cpu_sh" >&2
  bash "$cpu_sh" | tee -a "$tmp/off.jsonl" >&2
}
on() {
  echo "round $round, tracing on: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$SINK_PORT bash $cpu_sh" >&2
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$SINK_PORT OTEL_EXPORTER_OTLP_PROTOCOL=${OTLP_PROTOCOL:-http/protobuf} \
    bash "$cpu_sh" | tee -a "$tmp/on.jsonl" >&2
}
for round in $(seq 1 "${ROUNDS:-1}"); do
  if [ $((round % 2)) = 1 ]; then off; on; else on; off; fi
done
kill -TERM "$sink"; wait "$sink" 2>/dev/null; sink=
echo "sink took: $(tail -1 "$tmp/sink.log")" >&2

node -e '
const fs = require("fs");
const read = (f) => fs.readFileSync(f, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((r) => r.target === "relay");
const off = read(process.argv[1]);
const on = read(process.argv[2]);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
console.log("| mode | CPU µs/req, tracing off | CPU µs/req, tracing on | on/off (medians) |");
console.log("|---|---:|---:|---:|");
for (const mode of [...new Set(off.map((r) => r.mode))]) {
  const a = off.filter((r) => r.mode === mode).map((r) => r.cpu_us_per_req);
  const b = on.filter((r) => r.mode === mode).map((r) => r.cpu_us_per_req);
  if (b.length === 0) continue;
  console.log(`| ${mode} | ${a.join(", ")} | ${b.join(", ")} | ${(median(b) / median(a)).toFixed(3)} |`);
}' "$tmp/off.jsonl" "$tmp/on.jsonl"
