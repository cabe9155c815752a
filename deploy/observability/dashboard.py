#!/usr/bin/env python3
"""The Grafana dashboard of deploy/observability, written as code: run
`python3 deploy/observability/dashboard.py` after a change here, and commit
both files; `.ci/observability-check` fails when the JSON is not what this
writes, and when a metric named here is not one the server exposes.
Panels are laid out left to right, a new row at each `row(...)`."""

import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'job=~"$job", instance=~"$instance"'
RI = "$__rate_interval"

panels = []
next_id = 1
y = 0
x = 0
row_h = 0


def row(title):
    global next_id, y, x, row_h
    if x:
        y += row_h
        x = 0
        row_h = 0
    panels.append({"type": "row", "title": title, "id": next_id, "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
    next_id += 1
    y += 1


def place(w, h):
    global x, y, row_h
    if x + w > 24:
        y += row_h
        x = 0
        row_h = 0
    pos = {"h": h, "w": w, "x": x, "y": y}
    x += w
    row_h = max(row_h, h)
    return pos


def targets(exprs):
    out = []
    for i, (expr, legend) in enumerate(exprs):
        t = {"datasource": DS, "expr": expr, "legendFormat": legend, "range": True,
             "refId": chr(ord("A") + i)}
        out.append(t)
    return out


def ts(title, exprs, unit="short", w=8, h=8, description="", stack=False, min0=True):
    global next_id
    defaults = {
        "unit": unit,
        "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                   "showPoints": "never", "spanNulls": False,
                   "stacking": {"mode": "normal" if stack else "none", "group": "A"}},
        "color": {"mode": "palette-classic"},
    }
    if min0:
        defaults["min"] = 0
    p = {"type": "timeseries", "title": title, "id": next_id, "datasource": DS,
         "description": description, "gridPos": place(w, h),
         "fieldConfig": {"defaults": defaults, "overrides": []},
         "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                     "tooltip": {"mode": "multi", "sort": "desc"}},
         "targets": targets(exprs)}
    next_id += 1
    panels.append(p)


def stat(title, expr, unit="short", w=4, h=4, description="", thresholds=None, decimals=None):
    global next_id
    steps = [{"color": "green", "value": None}]
    for value, color in thresholds or []:
        steps.append({"color": color, "value": value})
    defaults = {"unit": unit, "color": {"mode": "thresholds"},
                "thresholds": {"mode": "absolute", "steps": steps}}
    if decimals is not None:
        defaults["decimals"] = decimals
    p = {"type": "stat", "title": title, "id": next_id, "datasource": DS,
         "description": description, "gridPos": place(w, h),
         "fieldConfig": {"defaults": defaults, "overrides": []},
         "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                     "colorMode": "value", "graphMode": "area", "justifyMode": "auto",
                     "orientation": "auto", "textMode": "auto"},
         "targets": [{"datasource": DS, "expr": expr, "instant": False, "range": True, "refId": "A"}]}
    next_id += 1
    panels.append(p)


def quantiles(metric, by=""):
    extra = f", {by}" if by else ""
    prefix = f"{{{{{by}}}}} " if by else ""
    return [(f'histogram_quantile({q}, sum by (le{extra}) (rate({metric}_bucket{{{SEL}}}[{RI}])))',
             f"{prefix}p{int(q * 100)}") for q in (0.5, 0.95, 0.99)]


# ---- overview
row("Overview")
stat("Engines reporting", f'count(tartan_build_info{{{SEL}}})',
     description="Processes whose /metrics Prometheus scraped (tartan_build_info).")
stat("Flows active", f'sum(tartan_flows_active{{{SEL}}})',
     description="Flows with work in progress, summed over the engines (each counted against its TARTAN_MAX_ACTIVE_FLOWS).")
stat("Flows started /s", f'sum(rate(tartan_flows_started_total{{{SEL}}}[{RI}]))', unit="reqps", decimals=2)
stat("Failed flows (share)",
     f'sum(rate(tartan_flows_finished_total{{{SEL}, status="failed"}}[{RI}])) / sum(rate(tartan_flows_finished_total{{{SEL}}}[{RI}]))',
     unit="percentunit", thresholds=[(0.05, "orange"), (0.1, "red")], decimals=1,
     description="Failed flows among those that finished (alert TartanFlowsFailing: over 10%).")
stat("Retries pending", f'sum(tartan_retries_pending{{{SEL}}})', thresholds=[(100, "orange"), (1000, "red")])
stat("Calls queued", f'sum(tartan_calls_queued{{{SEL}}})', thresholds=[(1, "orange")],
     description="Calls waiting for a call slot (TARTAN_MAX_CALLS).")

# ---- flows
row("Flows")
ts("Flows started and finished /s", [
    (f'sum(rate(tartan_flows_started_total{{{SEL}}}[{RI}]))', "started"),
    (f'sum by (status) (rate(tartan_flows_finished_total{{{SEL}}}[{RI}]))', "finished {{status}}"),
], unit="reqps", description="Flows started, and finished by status (completed, failed, cancelled), summed over the engines.")
ts("Flows active", [
    (f'sum by (instance) (tartan_flows_active{{{SEL}}})', "{{instance}}"),
], description="Flows with work in progress in each process; beyond TARTAN_MAX_ACTIVE_FLOWS, starts are refused (503).")
ts("Flow starts refused /s", [
    (f'sum by (reason) (rate(tartan_flow_starts_refused_total{{{SEL}}}[{RI}]))', "{{reason}}"),
], unit="reqps", description="POST /engine/flow answered with an error, by reason. overloaded: TARTAN_MAX_ACTIVE_FLOWS reached; unavailable: the database is unreachable or the process is stopping.")

# ---- attempts
row("Step attempts")
ts("Attempts /s by outcome", [
    (f'sum by (outcome) (rate(tartan_attempts_total{{{SEL}}}[{RI}]))', "{{outcome}}"),
], unit="reqps", stack=True, description="Calls of step endpoints by how they ended: success, accepted (async), retryable, permanent, timeout, aborted.")
ts("Failing attempts /s by step", [
    (f'sum by (step, outcome) (rate(tartan_attempts_total{{{SEL}, outcome=~"retryable|permanent|timeout"}}[{RI}]))', "{{step}} {{outcome}}"),
], unit="reqps", description="retryable or timeout: a step endpoint in trouble; permanent: requests it refuses.")
ts("Attempt duration", quantiles("tartan_attempt_duration_seconds"), unit="s",
   description="p50, p95 and p99 of step calls, from sending to the classified answer (aborted calls are not in it).")
ts("Attempt duration p95 by step", [
    (f'histogram_quantile(0.95, sum by (le, step) (rate(tartan_attempt_duration_seconds_bucket{{{SEL}}}[{RI}])))', "{{step}}"),
], unit="s")
ts("Attempts /s by call", [
    (f'sum by (call) (rate(tartan_attempts_total{{{SEL}}}[{RI}]))', "{{call}}"),
], unit="reqps", description="Work calls and compensation calls.")
ts("Webhooks /s", [
    (f'sum by (kind, result) (rate(tartan_webhooks_total{{{SEL}}}[{RI}]))', "{{kind}} {{result}}"),
], unit="reqps", description="Requests to webhook URLs (async steps' results and heartbeats), by how they were answered.")

# ---- retries and call slots
row("Retries and call slots")
ts("Retries", [
    (f'sum(tartan_retries_pending{{{SEL}}})', "pending"),
    (f'sum(tartan_timers_armed{{{SEL}}})', "timers armed"),
], description="Retry timers armed, and every timer armed (retries, async inactivity windows, flow deadlines). Alert TartanRetriesPilingUp: pending over 1000, or over 100 and growing, for 10m.")
ts("Retries scheduled, work parked, dispatch deferred /s", [
    (f'sum(rate(tartan_retries_scheduled_total{{{SEL}}}[{RI}]))', "retries scheduled"),
    (f'sum(rate(tartan_work_parked_total{{{SEL}}}[{RI}]))', "parked"),
    (f'sum(rate(tartan_dispatch_deferred_total{{{SEL}}}[{RI}]))', "deferred (step unhealthy)"),
], unit="ops")
ts("Retry timer lateness", quantiles("tartan_retry_timer_lateness_seconds")[1:], unit="s",
   description="How long after its due time a retry timer fired: a few milliseconds while the process keeps up.")
ts("Calls in flight and queued", [
    (f'sum by (instance) (tartan_calls_in_flight{{{SEL}}})', "in flight {{instance}}"),
    (f'sum by (instance) (tartan_calls_queued{{{SEL}}})', "queued {{instance}}"),
], description="Calls holding a call slot (TARTAN_MAX_CALLS), and waiting for one (TARTAN_MAX_QUEUED_CALLS).")
ts("Calls deferred /s", [
    (f'sum by (instance) (rate(tartan_calls_deferred_total{{{SEL}}}[{RI}]))', "{{instance}}"),
], unit="ops", description="Calls left to their lease because the call queue was full; each is made when its lease runs out.")
ts("Response bytes held", [
    (f'sum by (instance) (tartan_response_bytes_held{{{SEL}}})', "{{instance}}"),
], unit="bytes", description="Bytes of step response bodies held from reading to recording (TARTAN_MAX_INFLIGHT_BYTES).")

# ---- lanes and health
row("Lanes and step health")
ts("Lane calls in flight", [
    (f'sum by (lane) (tartan_lane_in_flight{{{SEL}}})', "{{lane}}"),
], description="Calls going through each lane (docs/lanes.md), summed over the engines.")
ts("Lane calls waiting", [
    (f'sum by (lane) (tartan_lane_waiting{{{SEL}}})', "{{lane}}"),
], description="Calls waiting in each lane for a slot, a rate token, a pause or a breaker.")
ts("Lane breaker open", [
    (f'max by (lane) (tartan_lane_breaker_open{{{SEL}}})', "{{lane}}"),
], description="1 while a lane's circuit breaker is open or half open.")
ts("Lane pauses and wait", [
    (f'sum by (lane) (increase(tartan_lane_pauses_total{{{SEL}}}[{RI}]))', "pauses {{lane}}"),
    (f'sum by (lane) (rate(tartan_lane_waited_seconds_total{{{SEL}}}[{RI}]))', "waited s/s {{lane}}"),
], description="Pauses an endpoint asked for (429/503 with Retry-After), and seconds waited in the lane per second (the average number of calls waiting).")
ts("Unhealthy steps", [
    (f'max by (step) (tartan_step_health{{{SEL}, status="unhealthy"}})', "{{step}}"),
], description="1 while a step's health check finds it unhealthy; its calls are deferred meanwhile.")

# ---- leases and storage
row("Leases and database")
ts("Lease takeovers and leases lost", [
    (f'sum by (instance) (increase(tartan_leases_taken_over_total{{{SEL}}}[5m]))', "taken over {{instance}}"),
    (f'sum by (instance) (increase(tartan_leases_lost_total{{{SEL}}}[5m]))', "lost {{instance}}"),
], description="Calls made again because their lease expired (an engine died, stalled or restarted), and calls abandoned because their lease was lost; each over the last 5 minutes.")
ts("Commit duration", quantiles("tartan_commit_duration_seconds"), unit="s",
   description="Group commits of decisions to the database: every decision waits for one. Alert TartanCommitsSlow: p99 over 500ms for 10m.")
ts("Commit batch size", quantiles("tartan_commit_batch_size")[::2] + [
    (f'sum(rate(tartan_commit_batch_size_sum{{{SEL}}}[{RI}])) / sum(rate(tartan_commit_batch_size_count{{{SEL}}}[{RI}]))', "mean"),
], description="Decisions per group commit (1 to 512).")
ts("Commits /s", [
    (f'sum by (instance) (rate(tartan_commit_duration_seconds_count{{{SEL}}}[{RI}]))', "{{instance}}"),
], unit="ops")
ts("Commit errors", [
    (f'sum by (instance, kind) (increase(tartan_commit_errors_total{{{SEL}}}[5m]))', "{{kind}} {{instance}}"),
], description="Decisions whose commit failed, over the last 5 minutes: unavailable (the database unreachable), database (a statement refused), corrupt (stored data unreadable). Alerts TartanDatabaseUnavailable and TartanCommitErrors.")
ts("Database connections", [
    (f'sum by (instance, pool, state) (tartan_db_pool_connections{{{SEL}}})', "{{pool}} {{state}} {{instance}}"),
    (f'sum by (instance, pool) (tartan_db_pool_max_connections{{{SEL}}})', "{{pool}} max {{instance}}"),
], description="Connections of each pool, idle and in use, against its maximum (db_pool, db_read_pool).")
ts("Database waits", [
    (f'sum by (instance, pool) (rate(tartan_db_pool_wait_seconds_total{{{SEL}}}[{RI}])) / sum by (instance, pool) (rate(tartan_db_pool_waits_total{{{SEL}}}[{RI}]))', "{{pool}} {{instance}}"),
], unit="s", description="Mean wait for a connection: group commits for theirs, API reads for a turn. Grows when a pool is too small or the database slow.")

# ---- HTTP
row("HTTP API")
ts("Requests /s by route and status", [
    (f'sum by (route, status) (rate(tartan_http_requests_total{{{SEL}}}[{RI}]))', "{{route}} {{status}}"),
], unit="reqps", w=12, h=9)
ts("Errors /s by route (5xx)", [
    (f'sum by (route, status) (rate(tartan_http_requests_total{{{SEL}, status=~"5.."}}[{RI}]))', "{{route}} {{status}}"),
], unit="reqps", w=12, h=9)
ts("Request latency p95 by route", [
    (f'histogram_quantile(0.95, sum by (le, route) (rate(tartan_http_request_duration_seconds_bucket{{{SEL}, route!~".*/status|.*/stream|/engine/ws"}}[{RI}])))', "{{route}}"),
], unit="s", w=12, h=9, description="Until the response started. Long-polling and streaming routes (status ?wait=, streams, WebSocket) are left out: they wait on purpose.")
ts("Request latency", quantiles("tartan_http_request_duration_seconds"), unit="s", w=12, h=9,
   description="Every route, long waits (status ?wait=) included.")

# ---- process
row("Process")
ts("CPU", [
    (f'sum by (instance) (rate(process_cpu_seconds_total{{{SEL}}}[{RI}]))', "{{instance}}"),
], unit="percentunit", w=6, description="CPU time per second: 1 is one core.")
ts("Resident memory", [
    (f'sum by (instance) (process_resident_memory_bytes{{{SEL}}})', "{{instance}}"),
], unit="bytes", w=6)
ts("Open file descriptors", [
    (f'sum by (instance) (process_open_fds{{{SEL}}})', "open {{instance}}"),
    (f'sum by (instance) (process_max_fds{{{SEL}}})', "limit {{instance}}"),
], w=6)


def build_table():
    global next_id
    p = {"type": "table", "title": "Build", "id": next_id, "datasource": DS,
         "description": "The release each engine runs (tartan_build_info).",
         "gridPos": place(6, 8),
         "fieldConfig": {"defaults": {}, "overrides": []},
         "options": {"showHeader": True},
         "transformations": [{"id": "organize", "options": {
             "excludeByName": {"Time": True, "Value": True, "__name__": True},
             "indexByName": {"instance": 0, "version": 1, "job": 2}}}],
         "targets": [{"datasource": DS, "expr": f'tartan_build_info{{{SEL}}}', "format": "table",
                      "instant": True, "range": False, "refId": "A"}]}
    next_id += 1
    panels.append(p)


build_table()

dashboard = {
    "annotations": {"list": [{
        "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts", "type": "dashboard"}]},
    "description": "Tartan engines: flows, step attempts, retries, call slots, lanes, leases, database commits, HTTP API, process (docs/operating.md, \"Dashboards and alerts\").",
    "editable": True,
    "fiscalYearStartMonth": 0,
    "graphTooltip": 1,
    "id": None,
    "links": [],
    "panels": panels,
    "refresh": "30s",
    "schemaVersion": 39,
    "tags": ["tartan"],
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [],
         "refresh": 1, "regex": "", "skipUrlSync": False},
        {"name": "job", "label": "Job", "type": "query", "datasource": DS,
         "definition": "label_values(tartan_build_info, job)",
         "query": {"query": "label_values(tartan_build_info, job)", "refId": "PrometheusVariableQueryEditor-VariableQuery"},
         "current": {}, "hide": 0, "includeAll": True, "allValue": ".+", "multi": True, "options": [],
         "refresh": 2, "regex": "", "skipUrlSync": False, "sort": 1},
        {"name": "instance", "label": "Instance", "type": "query", "datasource": DS,
         "definition": 'label_values(tartan_build_info{job=~"$job"}, instance)',
         "query": {"query": 'label_values(tartan_build_info{job=~"$job"}, instance)', "refId": "PrometheusVariableQueryEditor-VariableQuery"},
         "current": {}, "hide": 0, "includeAll": True, "allValue": ".+", "multi": True, "options": [],
         "refresh": 2, "regex": "", "skipUrlSync": False, "sort": 1},
    ]},
    "time": {"from": "now-3h", "to": "now"},
    "timepicker": {},
    "timezone": "",
    "title": "Tartan",
    "uid": "tartan-overview",
    "version": 1,
    "weekStart": "",
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grafana-dashboard.json")
with open(out, "w") as f:
    json.dump(dashboard, f, indent=2)
    f.write("\n")
