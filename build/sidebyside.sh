#!/usr/bin/env bash
# Serves one model with llamaserve and with llama.cpp's llama-server, one after the other, with the same
# slots, cells per slot and threads, drives each with the same load (internal/cmd/serveload: streamed
# completions, keep-alive, prompts of token ids, distinct or sharing a prefix), interleaves the rounds
# (the order of the servers alternates) and prints throughput and TTFT p50/p99 of each, the medians over
# the rounds and the ratios llamaserve / llama-server.
#
#   LLAMA_SERVER=/path/to/llama-server build/sidebyside.sh [MODEL.gguf]
#
# Settings (environment): PARALLEL=8 (slots: --parallel / -np), CTX=512 (cells per slot: --ctx; llama-server
# gets -c PARALLEL*CTX), THREADS=2, ROUNDS=2, CLIENTS="1 8 32 64", REQUESTS=3 (per client and level),
# PROMPT=128 (prompt tokens), SHARED="0 96" (prompt tokens every request shares), MAX_TOKENS=64,
# LLAMASERVE_ARGS / LLAMA_SERVER_ARGS (more options for one side), PORT=18180 (the first of the ports used). Both servers keep their own
# defaults otherwise (llamaserve's prefix cache and llama-server's prompt cache are both on).
# Upstream's llama-server at the pinned commit: TARGETS=llama-server ../shared/upstream/build.sh.
# The model: make models BENCH_MODELS=small (build/models/bench-small-q4_0.gguf).
# Each round runs every level once per server; on a 2-core machine a round of the defaults takes about
# 4 minutes per server. The CPU and the load average are printed with the results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-$root/build/models/bench-small-q4_0.gguf}
: "${LLAMA_SERVER:?set LLAMA_SERVER to the llama-server binary of llama.cpp}"
parallel=${PARALLEL:-8} ctx=${CTX:-512} threads=${THREADS:-2} rounds=${ROUNDS:-2}
clients=${CLIENTS:-1 8 32 64} requests=${REQUESTS:-3} prompt=${PROMPT:-128} shared=${SHARED:-0 96}
maxtok=${MAX_TOKENS:-64} port=
[ -f "$model" ] || { echo "sidebyside: no model $model (make models BENCH_MODELS=small)" >&2; exit 2; }
out=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait 2>/dev/null; rm -rf "$out"' EXIT
pid=
cd "$root"
eval "$(make -s env)"
go build -o "$out/llamaserve" ./cmd/llamaserve
go build -o "$out/serveload" ./internal/cmd/serveload
csv=$(echo $clients | tr " " ,)

starts=0
start() { # start SIDE: starts the server on a port of its own (a stopped llama-server's may stay busy a while), waits for /health
  port=$((${PORT:-18180} + starts)); starts=$((starts + 1))
  case $1 in
  llamaserve) "$out/llamaserve" -m "$model" --parallel "$parallel" --ctx "$ctx" --threads "$threads" \
      --addr "127.0.0.1:$port" ${LLAMASERVE_ARGS:-} >"$out/server.log" 2>&1 & ;;
  llama-server) "$LLAMA_SERVER" -m "$model" -np "$parallel" -c $((parallel * ctx)) -t "$threads" \
      --host 127.0.0.1 --port "$port" ${LLAMA_SERVER_ARGS:-} >"$out/server.log" 2>&1 & ;;
  esac
  pid=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    kill -0 $pid 2>/dev/null || { cat "$out/server.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "sidebyside: $1 did not start" >&2; cat "$out/server.log" >&2; exit 1
}
stop() { kill -INT $pid; wait $pid 2>/dev/null || true; pid=; }

echo "model $(basename "$model"), $parallel slots of $ctx cells, $threads threads; $prompt-token prompts, max_tokens $maxtok, $requests requests per client, streamed, keep-alive"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) CPUs)"
for r in $(seq "$rounds"); do
  sides="llamaserve llama-server"
  [ $((r % 2)) -eq 0 ] && sides="llama-server llamaserve"
  for side in $sides; do
    start "$side"
    for sh in $shared; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      "$out/serveload" -url "http://127.0.0.1:$port" -clients "$csv" -requests "$requests" -prompt-tokens "$prompt" \
        -shared "$sh" -max-tokens "$maxtok" -vocab 32000 -tsv | sed "s/^/$side\t$r\t$sh\t$load\t/" | tee -a "$out/results.tsv" >&2
    done
    stop
    echo "round $r: $side done (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
done

echo
echo "| prompts | clients | llamaserve tok/s | llama-server tok/s | ratio | TTFT p50 ms (ls / srv) | TTFT p99 ms (ls / srv) | load average |"
echo "|---|---|---|---|---|---|---|---|"
# results.tsv: side round shared load clients requests tokens wall tok/s p50 p99; medians over the rounds.
awk -F'\t' -v prompt="$prompt" -f - "$out/results.tsv" <<'EOF'
function median(s,   n, a, i, j, t) {
  n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $3 SUBSEP $5; tps[$1, k] = tps[$1, k] " " $9; p50[$1, k] = p50[$1, k] " " $10; p99[$1, k] = p99[$1, k] " " $11
  loads[k] = loads[k] (loads[k] == "" ? "" : ", ") $4; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
END { for (i = 1; i <= n; i++) { k = order[i]; split(k, f, SUBSEP)
  a = median(tps["llamaserve", k]); b = median(tps["llama-server", k])
  printf "| %s | %s | %.1f | %.1f | %.2f | %.0f / %.0f | %.0f / %.0f | %s |\n", (f[1] == 0 ? "distinct" : f[1] " of " prompt " shared"), f[2],
    a, b, (b > 0 ? a / b : 0), median(p50["llamaserve", k]), median(p50["llama-server", k]),
    median(p99["llamaserve", k]), median(p99["llama-server", k]), loads[k] } }
EOF
echo
echo "every round (side round shared load clients requests tokens wall_s tok/s p50_ms p99_ms):"
sort -t$'\t' -k3,3n -k5,5n -k2,2n "$out/results.tsv"
