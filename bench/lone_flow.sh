#!/usr/bin/env bash
# Where a lone flow's time goes (BENCHMARKS.md, "Where a lone flow's time
# goes"): a `tartan serve` on a fresh database, `load api --alone` driving
# it, and the loopback captured meanwhile (tcpdump; installed if missing),
# cut into segments by bench/lone_flow.py.
#
#   bash bench/lone_flow.sh [TARTAN] [LOAD] [sqlite|postgres] [FLOWS]
#
# Extra settings of the server come from the environment as they are
# (e.g. TARTAN_WORKER_THREADS=1). Targets 127.0.0.1 only; everything it
# starts is stopped and the database dropped on every way out.
set -euo pipefail
TARTAN=${1:-target/release/tartan}
LOAD=${2:-target/release/load}
STORE=${3:-postgres}
FLOWS=${4:-300}
PORT=18480
PG=postgres://postgres@127.0.0.1:5432
DB="bench_lone_$$"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "$STORE" = postgres ] && psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
command -v tcpdump >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q tcpdump >/dev/null

if [ "$STORE" = postgres ]; then
  psql -q "$PG/postgres" -c "CREATE DATABASE $DB"
  URL="$PG/$DB"
else
  URL="sqlite://$WORK/tartan.db"
fi
"$TARTAN" serve --listen "127.0.0.1:$PORT" --database-url "$URL" --step-hosts 127.0.0.1 \
  > "$WORK/serve.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
tcpdump -i lo -tt -nn -l -A -s 300 'tcp and (tcp[tcpflags] & tcp-push != 0)' > "$WORK/capture" 2>/dev/null &
PIDS+=($!)
sleep 0.5
"$LOAD" api --server "http://127.0.0.1:$PORT" --flows 1 --floor-flows 1 --alone "$FLOWS" \
  | grep "side=tartan" | grep -o "alone_ms_p50=[0-9.]*" | sed 's/^/load api: /'
sleep 0.5
python3 "$(dirname "$0")/lone_flow.py" "$WORK/capture" "$PORT"
