#!/usr/bin/env bash
# What the machine allows, beside Tartan's numbers (BENCHMARKS.md):
#  - the example step service's raw request rate on loopback, without the engine (wrk);
#  - Postgres's rate of small durable commits, 1 and 16 clients (pgbench).
# Usage: bash bench/limits.sh [seconds]   (needs wrk and pgbench; installs wrk if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
command -v wrk >/dev/null || { apt-get update -q && apt-get install -y -q wrk; }

echo "== loopback HTTP: POST /greet on the example step service, ${secs}s"
cargo build -q --release --example greeter
GREETER_ADDR=127.0.0.1:18181 ./target/release/examples/greeter > /dev/null &
greeter=$!
trap 'kill $greeter 2>/dev/null || true' EXIT
sleep 1
cat > /tmp/tartan-post.lua <<'LUA'
wrk.method = "POST"
wrk.body = '{"name":"Ada"}'
wrk.headers["Content-Type"] = "application/json"
LUA
wrk -t2 -c64 -d"${secs}s" -s /tmp/tartan-post.lua http://127.0.0.1:18181/greet | grep -E 'Requests/sec|Latency'

echo "== Postgres: one small durable transaction (insert), ${secs}s"
db="tartan_limits_$$"
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db"
psql -q -h 127.0.0.1 -U postgres -d "$db" -c "CREATE TABLE t (id bigserial PRIMARY KEY, v text)"
echo "INSERT INTO t (v) VALUES ('x');" > /tmp/tartan-commit.sql
for clients in 1 16; do
  printf '%2d clients: ' "$clients"
  pgbench -h 127.0.0.1 -U postgres -n -f /tmp/tartan-commit.sql -c "$clients" -j 2 -T "$secs" "$db" 2>/dev/null \
    | grep -E '^tps' | sed 's/ (without initial connection time)//'
done
psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE $db"
