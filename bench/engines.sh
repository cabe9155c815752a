#!/usr/bin/env bash
# One engine against three on one Postgres, at the same total load (issue 46,
# point 5; BENCHMARKS.md, "One Postgres, one or three engines").
#
#   bash bench/engines.sh [TARTAN] [LOAD] [FLOWS]
#
# For N = 1 and 3: a fresh database, N `tartan serve` processes on it, and
# N `load api --server` drivers at once, each with 1/N of 32 clients and of
# FLOWS flows (default 6000). Prints the flows/s the drivers reached
# together, and what the database's sessions waited on while they ran,
# sampled from pg_stat_activity every 20 ms: a commit waiting for another
# process's commit (the one event-position counter row) shows as a `Lock`
# wait (`transactionid` or `tuple`). Everything it starts is stopped and
# the databases dropped on every way out. Targets 127.0.0.1 only.
set -euo pipefail
TARTAN=${1:-target/release/tartan}
LOAD=${2:-target/release/load}
FLOWS=${3:-6000}
PG=postgres://postgres@127.0.0.1:5432
WORK=$(mktemp -d)
PIDS=()
DBS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for d in "${DBS[@]}"; do psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

run() {
  local n=$1 db="bench_engines_$$_$1"
  DBS+=("$db")
  psql -q "$PG/postgres" -c "CREATE DATABASE $db"
  local ports=()
  for i in $(seq 1 "$n"); do
    local port=$((18400 + i))
    ports+=("$port")
    "$TARTAN" serve --listen "127.0.0.1:$port" --node-id "engine-$i" \
      --database-url "$PG/$db" > "$WORK/engine-$n-$i.log" 2>&1 &
    PIDS+=($!)
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 1 100); do
      curl -fs "http://127.0.0.1:$port/health" > /dev/null && break
      sleep 0.1
    done
  done
  # The sampler: what each active session of this database waits on.
  ( while :; do
      psql -Atq "$PG/postgres" -c "SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') \
        FROM pg_stat_activity WHERE datname = '$db' AND state = 'active' AND pid <> pg_backend_pid()"
      sleep 0.02
    done ) > "$WORK/waits-$n.txt" 2>/dev/null &
  local sampler=$!
  PIDS+=("$sampler")
  local drivers=()
  for port in "${ports[@]}"; do
    "$LOAD" api --server "http://127.0.0.1:$port" --clients $((32 / n)) --flows $((FLOWS / n)) \
      --floor-flows 2000 --alone 5 > "$WORK/load-$n-$port.txt" 2>&1 &
    drivers+=($!)
  done
  for d in "${drivers[@]}"; do wait "$d" || { cat "$WORK"/load-"$n"-*.txt; exit 1; }; done
  kill "$sampler" 2>/dev/null || true
  local total
  total=$(grep -h 'side=tartan' "$WORK"/load-"$n"-*.txt | sed -E 's/.*flows_per_s=([0-9.]+).*/\1/' | awk '{ s += $1 } END { print s }')
  echo "engines=$n flows_per_s_total=$total"
  echo "  waits (samples of active sessions, by wait event):"
  sort "$WORK/waits-$n.txt" | uniq -c | sort -rn | head -8 | sed 's/^/    /'
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  PIDS=()
  sleep 1
}

run 1
run 3
