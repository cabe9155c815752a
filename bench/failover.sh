#!/usr/bin/env bash
# Postgres failover under load: what Tartan keeps when its primary dies.
#
# What it proves. Three `tartan serve` engines share one Postgres database
# reached through HAProxy, which routes to whichever of two Patroni-managed
# Postgres nodes is the primary (Patroni's `GET /primary` health check). A
# driver (bench/src/bin/failover/) serves the steps itself (a sync step that
# answers 503 with Retry-After to each work item's first call, an async step
# answering through its webhook with a heartbeat, a for_each step, and for
# one flow in five a last step that fails the flow for good on its first
# call), starts flows round-robin across the engines at a steady rate,
# retrying a start with the same flow id on 503 or a connection error,
# probes writes every 100 ms, and every 3 s creates a bulk retry job for the
# flows that failed, acting on them as fast as they fail, so that a job is
# running when the primary dies. Meanwhile this script kills the primary
# node twice (SIGKILL of its postmaster and its Patroni at once, as losing
# the machine), waits for Patroni to promote the replica, and starts the
# lost node's Patroni again after a while so that it rejoins as a replica
# (pg_rewind). When the load stops the driver creates one more job, waits,
# bounded, for the jobs and the flows to finish and checks, from its own
# records and the engines' API, that every start answered 201 completed (the
# flows failed on purpose, once a job retried them), that no work item
# (receipt token) was completed twice, that every webhook answered 200 is in
# the history, that every bulk job completed without failing on a flow and
# retried no flow twice, and that no engine still holds a flow in memory
# (`tartan_flows_active` back to 0 within 20 s); and measures the longest
# write outage. In `--mode sync` (Patroni `synchronous_mode`,
# `synchronous_commit = on`) anything lost, completed twice, left undone by
# a bulk job or left in memory fails the run; in `--mode async` losses are
# reported (asynchronous replication may lose the last commits of a dead
# primary) and only a double completion or a flow retried twice by one job
# fails it.
#
# Usage (as root; it installs what is missing and builds the release binary):
#   bash bench/failover.sh --mode sync|async [--quick] [--rate N] [--hold-wal S] [--keep]
# --quick: shorter phases (a run under 3 minutes once built); --rate: flows
# started per second (default 20); --hold-wal S: stop the primary's WAL
# sender (SIGSTOP) S seconds before each kill, and kill it with the node, so
# that the primary dies with S seconds of commits the replica never
# received: in async mode that is what a lagging replica loses (and shows
# that the checks see a loss), in sync mode the commits of those seconds wait
# for the standby and none is acknowledged; --keep: leave the temp dir (logs,
# data) behind for a look. Exit status: the driver's (0 passed, 1 the checks
# failed), 2 when the cluster could not be set up or driven as planned.
#
# What it needs: Debian's patroni, etcd-server and haproxy (installed when
# missing), PostgreSQL 15 server binaries in /usr/lib/postgresql/15/bin, psql,
# curl, the `postgres` user, and the ports BASE..BASE+29 free on 127.0.0.1
# (TARTAN_FAILOVER_BASE_PORT, default 27100). Everything listens on
# 127.0.0.1 and lives in one temp dir under /tmp, removed on exit with every
# process the script started. The engines log at TARTAN_FAILOVER_LOG (a
# RUST_LOG filter, default `info`) to engineN.log there (see --keep).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=""
quick=0
rate=20
keep=0
hold_wal=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mode) mode="${2:-}"; shift 2 ;;
    --quick) quick=1; shift ;;
    --rate) rate="${2:-}"; shift 2 ;;
    --keep) keep=1; shift ;;
    --hold-wal) hold_wal="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$mode" == sync || "$mode" == async ]] || { echo "--mode sync or --mode async is required" >&2; exit 2; }
[[ "$rate" =~ ^[0-9]+$ && "$rate" -ge 1 ]] || { echo "--rate takes a whole number of at least 1" >&2; exit 2; }
[[ "$hold_wal" =~ ^[0-9]+$ ]] || { echo "--hold-wal takes whole seconds" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "run as root: Postgres and Patroni are started as the postgres user" >&2; exit 2; }

# Phases, in seconds: load before the first kill; how long a killed node
# stays down; load between the rejoin and the second kill; load after the
# second rejoin. Waits for the cluster are bounded separately (WAIT).
if [[ $quick == 1 ]]; then warm=5 down=8 between=3 tail=5 settle=60; else warm=15 down=15 between=10 tail=15 settle=120; fi
WAIT=90
pgbin=/usr/lib/postgresql/15/bin
base=${TARTAN_FAILOVER_BASE_PORT:-27100}
etcd_port=$((base)) etcd_peer=$((base + 1)) haproxy_port=$((base + 2)) haproxy_stats=$((base + 3))
pg_port=([1]=$((base + 10)) [2]=$((base + 11)))
rest_port=([1]=$((base + 12)) [2]=$((base + 13)))
engine_port=([1]=$((base + 20)) [2]=$((base + 21)) [3]=$((base + 22)))
steps_port=$((base + 25))
db=tartan_failover
target="${CARGO_TARGET_DIR:-target}"
started=$(date +%s)

log() { printf '%s [%4ss] %s\n' "$(date +%H:%M:%S)" "$(($(date +%s) - started))" "$*"; }
fail() { log "FAILED: $*"; exit 2; }

# ---- what it needs -------------------------------------------------------
missing=()
command -v patroni >/dev/null || missing+=(patroni)
command -v etcd >/dev/null || missing+=(etcd-server)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v curl >/dev/null || missing+=(curl)
command -v psql >/dev/null || missing+=(postgresql-client)
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
[[ -x $pgbin/postgres ]] || fail "no PostgreSQL 15 server in $pgbin (apt-get install postgresql-15)"
id postgres >/dev/null 2>&1 || fail "no postgres user"
log "building the release binary and the driver"
cargo build -q --release -p tartan -p tartan-bench --bin tartan --bin failover
tartan="$target/release/tartan"
driver="$target/release/failover"

# ---- clean-up of everything started, whatever happens ------------------
tmp=$(mktemp -d /tmp/tartan-failover.XXXXXX)
chmod 755 "$tmp"
# Every process started here, by kind, for the clean-up.
declare -A patroni_pid=()
engine_pid=()
held_sender=""     # a WAL sender stopped by --hold-wal, to end on exit
# stop_all SECONDS PID...: SIGTERM, then SIGKILL whatever still runs after SECONDS.
stop_all() {
  local secs=$1; shift
  [[ $# -gt 0 ]] || return 0
  kill -TERM "$@" 2>/dev/null
  for _ in $(seq 1 $((secs * 2))); do
    local alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && return 0
    sleep 0.5
  done
  kill -KILL "$@" 2>/dev/null
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [[ -n "$held_sender" ]] && kill -KILL "$held_sender" 2>/dev/null
  [[ -n "${driver_pid:-}" ]] && stop_all 5 "$driver_pid"
  # The engines first, while their database is still there to hand leases
  # back to; then HAProxy, Patroni (which stops its Postgres) and etcd.
  stop_all 15 "${engine_pid[@]}"
  [[ -n "${haproxy_pid:-}" ]] && stop_all 5 "$haproxy_pid"
  stop_all 20 "${patroni_pid[@]}"
  for node in 1 2; do
    local pm
    pm=$(head -1 "$tmp/pg$node/data/postmaster.pid" 2>/dev/null) || continue
    # Only a postmaster of this data dir: the file outlives a killed one.
    [[ -n "$pm" ]] && tr '\0' ' ' < "/proc/$pm/cmdline" 2>/dev/null | grep -q -- "$tmp/pg$node/data" \
      && kill -KILL "$pm" 2>/dev/null
  done
  [[ -n "${etcd_pid:-}" ]] && stop_all 5 "$etcd_pid"
  if [[ $keep == 1 ]]; then
    log "kept $tmp (logs and data); remove it with: rm -rf $tmp"
  else
    sleep 1
    rm -rf "$tmp"
  fi
  log "done in $(($(date +%s) - started)) s, exit $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in $etcd_port $etcd_peer $haproxy_port $haproxy_stats "${pg_port[@]}" "${rest_port[@]}" "${engine_port[@]}" $steps_port; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then fail "port $port is in use (set TARTAN_FAILOVER_BASE_PORT)"; fi
done

# wait_for SECONDS WHAT COMMAND...: run COMMAND every 0.5 s until it succeeds.
wait_for() {
  local secs=$1 what=$2; shift 2
  local until=$(($(date +%s) + secs))
  until "$@" >/dev/null 2>&1; do
    [[ $(date +%s) -lt $until ]] || return 1
    sleep 0.5
  done
}
http_ok() { [[ $(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1") == 200 ]]; }

# ---- etcd ----------------------------------------------------------------
log "starting etcd on 127.0.0.1:$etcd_port"
etcd --name failover --data-dir "$tmp/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "failover=http://127.0.0.1:$etcd_peer" --initial-cluster-token "tartan-failover-$$" \
  --initial-cluster-state new > "$tmp/etcd.log" 2>&1 &
etcd_pid=$!
wait_for 30 etcd http_ok "http://127.0.0.1:$etcd_port/health" || fail "etcd did not start (log: $tmp/etcd.log)"

# ---- two Postgres nodes under Patroni -------------------------------------
if [[ $mode == sync ]]; then sync_mode=true; else sync_mode=false; fi
for node in 1 2; do
  dir="$tmp/pg$node"
  mkdir -p "$dir/log"
  cat > "$tmp/pg$node.yml" <<YAML
scope: tartan-failover-$$
name: pg$node
log:
  level: INFO
restapi:
  listen: 127.0.0.1:${rest_port[$node]}
  connect_address: 127.0.0.1:${rest_port[$node]}
etcd3:
  hosts: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    # Short timings, so that a failover takes seconds: the leader key lives
    # 10 s after the last renewal; HA loops run every 2 s.
    ttl: 10
    loop_wait: 2
    retry_timeout: 3
    # async mode: the replica must promote even when it lags a little.
    maximum_lag_on_failover: 1073741824
    synchronous_mode: $sync_mode
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        synchronous_commit: "on"
        wal_log_hints: "on"
        max_connections: 200
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 512MB
  initdb:
    - encoding: UTF8
    - data-checksums
    - auth: trust
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${pg_port[$node]}
  connect_address: 127.0.0.1:${pg_port[$node]}
  data_dir: $dir/data
  bin_dir: $pgbin
  pgpass: $dir/pgpass
  authentication:
    replication: {username: replicator, password: replicator}
    superuser: {username: postgres, password: postgres}
    rewind: {username: postgres, password: postgres}
  parameters:
    unix_socket_directories: $dir
    logging_collector: "on"
    log_directory: $dir/log
    log_filename: postgresql.log
    log_min_messages: warning
YAML
  chown -R postgres:postgres "$dir" "$tmp/pg$node.yml"
done

# start_node N: Patroni of node N, as the postgres user (setpriv execs, so
# the pid is Patroni's own, which is what a kill must reach).
start_node() {
  local node=$1
  HOME="$tmp/pg$node" setpriv --reuid=postgres --regid=postgres --init-groups \
    patroni "$tmp/pg$node.yml" >> "$tmp/pg$node/patroni.log" 2>&1 &
  patroni_pid[$node]=$!
}
role_of() {
  curl -s -m 2 "http://127.0.0.1:${rest_port[$1]}/cluster" \
    | python3 -c 'import json, sys; print(*[m["role"] for m in json.load(sys.stdin)["members"] if m["name"] == sys.argv[1]])' "pg$1"
}
is_primary() { http_ok "http://127.0.0.1:${rest_port[$1]}/primary"; }
primary_node() { for node in 1 2; do is_primary "$node" && { echo "$node"; return 0; }; done; return 1; }
# A replica that streams from the primary (and, in sync mode, is its
# synchronous standby): the state in which losing the primary loses nothing
# (sync) or little (async). Patroni 3.0 says "running" for a replica that
# streams and one that does not yet, so the primary's pg_stat_replication
# decides.
is_good_replica() {
  local node=$1 primary want state
  primary=$(primary_node) || return 1
  [[ $primary != "$node" ]] || return 1
  if [[ $mode == sync ]]; then want=sync; else want=async; fi
  state=$(psql -X -At -h 127.0.0.1 -p "${pg_port[$primary]}" -U postgres -d postgres \
    -c "SELECT state || '/' || sync_state FROM pg_stat_replication WHERE application_name = 'pg$node'")
  [[ "$state" == "streaming/$want" ]] || return 1
  [[ $mode == async || $(role_of "$node") == sync_standby ]]
}

log "starting Patroni pg1 (bootstraps the cluster)"
start_node 1
wait_for $WAIT "pg1 primary" is_primary 1 || fail "pg1 did not become primary (log: $tmp/pg1/patroni.log)"
log "starting Patroni pg2 (replica)"
start_node 2
wait_for $WAIT "pg2 replica" is_good_replica 2 || fail "pg2 did not become a $mode replica (log: $tmp/pg2/patroni.log)"

# ---- HAProxy to the primary ---------------------------------------------
cat > "$tmp/haproxy.cfg" <<CFG
global
  maxconn 2000
defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s
listen primary
  bind 127.0.0.1:$haproxy_port
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 500ms fastinter 250ms fall 2 rise 1 on-marked-down shutdown-sessions
  server pg1 127.0.0.1:${pg_port[1]} maxconn 500 check port ${rest_port[1]}
  server pg2 127.0.0.1:${pg_port[2]} maxconn 500 check port ${rest_port[2]}
listen stats
  mode http
  bind 127.0.0.1:$haproxy_stats
  stats enable
  stats uri /stats
CFG
log "starting HAProxy on 127.0.0.1:$haproxy_port"
haproxy -db -f "$tmp/haproxy.cfg" > "$tmp/haproxy.log" 2>&1 &
haproxy_pid=$!
# HAProxy takes servers for up until their checks say otherwise: wait until
# the primary alone is up in its view, so that nothing reaches a standby.
routes_to_primary() {
  local node up
  node=$(primary_node) || return 1
  up=$(curl -s -m 2 "http://127.0.0.1:$haproxy_stats/stats;csv" | awk -F, '$1 == "primary" && $2 ~ /^pg/ && $18 == "UP" { print $2 }')
  [[ "$up" == "pg$node" ]]
}
psql_primary() { psql -X -q -h 127.0.0.1 -p "$haproxy_port" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
writable() { [[ $(psql_primary -At -c "SELECT pg_is_in_recovery()") == f ]]; }
wait_for 30 haproxy routes_to_primary || fail "HAProxy does not route to the primary alone (log: $tmp/haproxy.log)"
wait_for 30 haproxy writable || fail "HAProxy does not reach the primary (log: $tmp/haproxy.log)"
psql_primary -c "CREATE DATABASE $db"
log "cluster up: $(psql_primary -At -c "SELECT current_setting('port')") is the primary; synchronous_standby_names = '$(psql_primary -At -c 'SHOW synchronous_standby_names')'"

# ---- three engines -----------------------------------------------------
engines=()
for n in 1 2 3; do
  TARTAN_DATABASE_URL="postgres://postgres@127.0.0.1:$haproxy_port/$db" \
  TARTAN_LISTEN="127.0.0.1:${engine_port[$n]}" TARTAN_NODE_ID="failover-$n" \
  TARTAN_STEP_HOSTS=127.0.0.1 TARTAN_LEASE=5s TARTAN_RETENTION=0 RUST_LOG="${TARTAN_FAILOVER_LOG:-info}" \
    "$tartan" serve > "$tmp/engine$n.log" 2>&1 &
  engine_pid[$n]=$!
  engines+=("http://127.0.0.1:${engine_port[$n]}")
done
for n in 1 2 3; do
  wait_for 60 "engine $n" http_ok "${engines[n - 1]}/ready" || fail "engine $n is not ready (log: $tmp/engine$n.log)"
done
log "engines ready: ${engines[*]}"

# ---- load, and the primary killed twice ----------------------------------
engine_list=$(IFS=,; echo "${engines[*]}")
"$driver" --mode "$mode" --engines "$engine_list" --steps-listen "127.0.0.1:$steps_port" \
  --rate "$rate" --stop-file "$tmp/stop" --duration 600 --settle "$settle" \
  --ready-file "$tmp/load-started" > "$tmp/driver.log" 2>&1 &
driver_pid=$!
wait_for 60 "load" test -e "$tmp/load-started" || fail "the driver did not start its load (log: $tmp/driver.log)"
log "load started ($rate flows/s and a write probe every 100 ms)"

kills=()
kill_primary() {
  local round=$1 node other pm t0 t1 t2
  node=$(primary_node) || fail "no primary before kill $round"
  other=$((3 - node))
  pm=$(head -1 "$tmp/pg$node/data/postmaster.pid")
  if [[ $hold_wal -gt 0 ]]; then
    held_sender=$(psql -X -At -h 127.0.0.1 -p "${pg_port[$node]}" -U postgres -d postgres \
      -c "SELECT pid FROM pg_stat_replication WHERE application_name = 'pg$other'")
    [[ -n "$held_sender" ]] || fail "no WAL sender on pg$node to hold"
    log "kill $round: holding pg$node's WAL sender to pg$other ($held_sender) for $hold_wal s"
    kill -STOP "$held_sender"
    sleep "$hold_wal"
  fi
  log "kill $round: SIGKILL of pg$node's postmaster ($pm) and Patroni (${patroni_pid[$node]})"
  t0=$(date +%s%N)
  kill -KILL "$pm" "${patroni_pid[$node]}"
  # The held sender dies with its node, what it never sent with it.
  if [[ -n "$held_sender" ]]; then kill -KILL "$held_sender"; held_sender=""; fi
  wait "${patroni_pid[$node]}" 2>/dev/null || true
  wait_for $WAIT "promotion" is_primary "$other" || fail "pg$other was not promoted (log: $tmp/pg$other/patroni.log)"
  t1=$(date +%s%N)
  wait_for 30 "haproxy" routes_to_primary || fail "HAProxy does not route to pg$other alone"
  wait_for 30 "haproxy" writable || fail "HAProxy does not reach pg$other"
  t2=$(date +%s%N)
  log "kill $round: pg$other is primary after $(((t1 - t0) / 1000000)) ms, writable through HAProxy after $(((t2 - t0) / 1000000)) ms"
  kills+=("kill $round of pg$node: promoted pg$other after $(((t1 - t0) / 1000000)) ms, writable through HAProxy after $(((t2 - t0) / 1000000)) ms")
  sleep "$down"
  log "kill $round: starting pg$node's Patroni again"
  start_node "$node"
  wait_for $WAIT "rejoin" is_good_replica "$node" || fail "pg$node did not rejoin as a $mode replica (log: $tmp/pg$node/patroni.log)"
  log "kill $round: pg$node is a $(role_of "$node") again ($(((($(date +%s%N)) - t0) / 1000000)) ms after the kill)"
}
driver_alive() { kill -0 "$driver_pid" 2>/dev/null || fail "the driver exited during the load (log: $tmp/driver.log)"; }

sleep "$warm"; driver_alive
kill_primary 1
sleep "$between"; driver_alive
kill_primary 2
sleep "$tail"; driver_alive
touch "$tmp/stop"
log "load stopped; the driver waits for the flows and checks them"

rc=0
wait "$driver_pid" || rc=$?
driver_pid=""
for n in 1 2 3; do
  kill -0 "${engine_pid[$n]}" 2>/dev/null || { log "engine $n EXITED during the run (log: $tmp/engine$n.log)"; tail -20 "$tmp/engine$n.log"; rc=1; }
done
echo
cat "$tmp/driver.log"
echo
echo "Failovers ($mode mode):"
printf '  %s\n' "${kills[@]}"
# What each engine still holds once every flow it knows of should be over:
# flows in memory and calls (a flow the database lost may linger here).
# Given up to 30 s to drain, so that what is left is stuck, not late.
metric() { curl -s -m 5 "$1/metrics" | awk -v m="tartan_$2" '$1 == m { print $2 }'; }
drained() {
  for engine in "${engines[@]}"; do
    for m in flows_active calls_in_flight calls_queued; do [[ $(metric "$engine" $m) == 0 ]] || return 1; done
  done
}
t0=$(date +%s)
if wait_for 30 drained drained; then
  echo "  the engines held no flow and no call $(($(date +%s) - t0)) s after the checks"
else
  echo "  the engines STILL HOLD flows or calls 30 s after the checks; active flows in the database:" \
    "$(curl -s -m 10 -X POST "${engines[0]}/engine/flow/query" -H 'Content-Type: application/json' \
      -d '{"statuses": ["active"], "limit": 20}' \
      | python3 -c 'import json, sys; print(" ".join(f["id"] for f in json.load(sys.stdin)["flows"]) or "none")')"
fi
for n in 1 2 3; do
  held=$(curl -s -m 5 "${engines[n - 1]}/metrics" \
    | awk '/^tartan_(flows_active|calls_in_flight|calls_queued|timers_armed|retries_pending)[ {]/ { sub(/^tartan_/, "", $1); printf "%s %s, ", $1, $2 }')
  printf '  engine %s: %s%s WARN, %s ERROR log lines\n' "$n" "$held" \
    "$(grep -c ' WARN ' "$tmp/engine$n.log" || true)" "$(grep -c ' ERROR ' "$tmp/engine$n.log" || true)"
done
log "run took $(($(date +%s) - started)) s"
exit "$rc"
