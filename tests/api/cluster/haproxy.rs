//! Argyll's deployment in front of Tartan (docs/argyll.md, "Switching an
//! Argyll deployment"): three engines on one Postgres, configured with
//! Argyll's environment variables, behind HAProxy routed as Argyll's
//! `haproxy/haproxy.cfg` routes (reads to any engine whose `/health`
//! answers, writes to those whose `X-Argyll-Raft-State` is `leader`). Reads
//! and writes both work through it, and an engine whose database takes no
//! writes leaves the write backend while it still serves reads.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use sqlx::Connection;
use tartan_testkit::{Backend, TestDb};

use crate::helpers::{json_reply, spawn_serve, Binary, StepServer};

/// HAProxy's configuration as Argyll's file has it, but for the addresses:
/// the same frontend rules (webhooks, and writes to steps and to
/// `/engine/flow`, to the write backend; everything else to the read
/// backend) and the same checks (`GET /health`: `200` for reads, the
/// header `X-Argyll-Raft-State: leader` for writes, every 3 s, once to
/// rise or fall).
fn haproxy_config(listen: u16, engines: &[&str]) -> String {
    let servers = |backend: &str| {
        engines
            .iter()
            .enumerate()
            .map(|(i, addr)| format!("    server {backend}-{} {addr} check\n", i + 1))
            .collect::<String>()
    };
    format!(
        "global\n    log stdout format raw local0\n\n\
         defaults\n    log global\n    mode http\n    option httplog\n    option dontlognull\n\
         \x20   timeout connect 5s\n    timeout client 300s\n    timeout server 300s\n\n\
         frontend argyll\n    bind 127.0.0.1:{listen}\n    option forwardfor\n\
         \x20   http-request set-header X-Forwarded-Proto http\n\
         \x20   acl write_webhook path_beg /webhook/\n\
         \x20   acl write_method method POST PUT DELETE PATCH\n\
         \x20   acl write_step path_beg /engine/step\n\
         \x20   acl write_flow path -i /engine/flow\n\
         \x20   use_backend argyll_write if write_webhook\n\
         \x20   use_backend argyll_write if write_method write_step\n\
         \x20   use_backend argyll_write if write_method write_flow\n\
         \x20   default_backend argyll_read\n\n\
         backend argyll_read\n    option httpchk GET /health\n    http-check expect status 200\n\
         \x20   default-server inter 15s fastinter 5s downinter 30s rise 2 fall 2\n{}\n\
         backend argyll_write\n    option httpchk GET /health\n\
         \x20   http-check expect hdr name X-Argyll-Raft-State value leader\n\
         \x20   default-server inter 3s fastinter 1s downinter 5s rise 1 fall 1\n{}",
        servers("read"),
        servers("write"),
    )
}

/// Debian's `haproxy`, where it is installed; under CI a missing one fails
/// the test (`.ci/run` installs it).
fn haproxy() -> Option<&'static str> {
    let found = std::process::Command::new("haproxy")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found && std::env::var_os("CI").is_some() {
        panic!("haproxy is not installed (apt-get install haproxy)");
    }
    if !found {
        eprintln!("skipped: haproxy is not installed");
    }
    found.then_some("haproxy")
}

/// A port free now on 127.0.0.1, for HAProxy to bind.
fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    socket.local_addr().expect("addr").port()
}

/// An engine started as an Argyll node is: Argyll's variables only (its
/// Raft ones among them), `url` its database.
async fn argyll_node(n: usize, url: &str) -> Binary {
    let id = format!("argyll-{n}");
    spawn_serve(
        &["--database-url", url],
        &[
            ("API_HOST", "127.0.0.1"),
            ("API_PORT", "0"),
            ("RAFT_NODE_ID", &id),
            ("RAFT_ADDRESS", "127.0.0.1:9701"),
            ("RAFT_SERVERS", "argyll-1=127.0.0.1:9701"),
            ("LOG_LEVEL", "info"),
        ],
    )
    .await
}

/// A request through the proxy: status, `X-Argyll-Raft-State` and body.
async fn through(
    client: &reqwest::Client,
    proxy: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let mut request = client.request(method, format!("http://{proxy}{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let reply = request.send().await.expect("through the proxy");
    let status = reply.status().as_u16();
    let state = reply
        .headers()
        .get("x-argyll-raft-state")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, state, reply.json().await.unwrap_or(Value::Null))
}

/// `X-Argyll-Raft-State` of the engine at `addr`, looked at until it says
/// `want` (each look also asks the engine to look at its database).
async fn raft_state_becomes(client: &reqwest::Client, addr: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = None;
    while Instant::now() < deadline {
        let (_, state, _) = through(client, addr, Method::GET, "/health", None).await;
        if state.as_deref() == Some(want) {
            return;
        }
        seen = state;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{addr}'s X-Argyll-Raft-State stayed {seen:?}, not {want}");
}

/// Start `count` flows of `step` through the proxy, ids `prefix-<n>`:
/// every start's status.
async fn start_flows(client: &reqwest::Client, proxy: &str, prefix: &str, count: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for n in 0..count {
        let start = json!({"id": format!("{prefix}-{n}"), "goals": ["echo"], "init": {"x": [n]}});
        let (status, _, body) = through(client, proxy, Method::POST, "/engine/flow", Some(start)).await;
        assert!(status == 201 || status == 503, "{status} {body}");
        statuses.push(status);
    }
    statuses
}

/// Every flow `prefix-0..count` read through the proxy until completed.
async fn all_complete(client: &reqwest::Client, proxy: &str, prefix: &str, count: usize) {
    for n in 0..count {
        let path = format!("/engine/flow/{prefix}-{n}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, _, flow) = through(client, proxy, Method::GET, &path, None).await;
            if status == 200 && flow["status"] == "completed" {
                break;
            }
            assert!(Instant::now() < deadline, "{path}: {status} {flow}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Run `sql` on the maintenance database.
async fn admin(sql: &str) {
    let mut admin = sqlx::PgConnection::connect(&tartan_testkit::pg_admin_url())
        .await
        .expect("admin connection");
    sqlx::raw_sql(sql).execute(&mut admin).await.expect(sql);
    let _ = admin.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argylls_haproxy_routes_writes_to_engines_that_take_them() {
    let Some(haproxy) = haproxy() else {
        return;
    };
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // The third engine logs in as a role of its own, so that its sessions
    // alone can be made read-only, as a connection to a standby is.
    let name = db.url.rsplit('/').next().unwrap_or_default();
    let name = name.split('?').next().unwrap_or_default().to_string();
    let role = format!("{name}_ro");
    let mut url = reqwest::Url::parse(&db.url).expect("database url");
    let password = url.password().map(str::to_string);
    admin(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN SUPERUSER{}",
        password
            .as_deref()
            .map(|p| format!(" PASSWORD '{p}'"))
            .unwrap_or_default()
    ))
    .await;
    url.set_username(&role).expect("username");
    let readonly_url = url.to_string();

    let svc = StepServer::start(|r, _| json_reply(200, json!({"y": r.body["x"].clone()}))).await;
    let engines = [
        argyll_node(1, &db.url).await,
        argyll_node(2, &db.url).await,
        argyll_node(3, &readonly_url).await,
    ];
    let addrs: Vec<&str> = engines.iter().map(|e| e.addr.as_str()).collect();
    // Argyll's variables were read: its node id, its Raft ones ignored aloud.
    let client = reqwest::Client::new();
    let (status, state, health) = through(&client, addrs[0], Method::GET, "/health", None).await;
    assert_eq!(status, 200);
    assert_eq!(state.as_deref(), Some("leader"), "{health}");
    assert_eq!(health["details"]["node_id"], "argyll-1", "{health}");
    assert_eq!(health["details"]["backend"]["type"], "postgres", "{health}");
    assert_eq!(health["details"]["backend"]["state"], "leader", "{health}");
    assert_eq!(health["details"]["websocket"]["clients"], 0, "{health}");
    let warned = engines[0]
        .log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|l| l.contains("RAFT_SERVERS") && l.contains("ignored"));
    assert!(warned, "RAFT_SERVERS is said to be ignored");

    let listen = free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("haproxy.cfg");
    std::fs::write(&config, haproxy_config(listen, &addrs)).expect("write haproxy.cfg");
    let _proxy = tokio::process::Command::new(haproxy)
        .arg("-db")
        .arg("-f")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start haproxy");
    let proxy = format!("127.0.0.1:{listen}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("http://{proxy}/health")).await.is_err() {
        assert!(Instant::now() < deadline, "haproxy never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A write (the step) and reads, through the proxy.
    let step = json!({"id": "echo", "name": "echo", "type": "sync", "http": {"endpoint": svc.url("/echo")},
        "attributes": {"x": {"role": "required"}, "y": {"role": "output"}}});
    let (status, _, body) = through(&client, &proxy, Method::POST, "/engine/step", Some(step)).await;
    assert_eq!(status, 201, "{body}");
    let statuses = start_flows(&client, &proxy, "before", 12).await;
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    all_complete(&client, &proxy, "before", 12).await;

    // The third engine's database takes no more writes: it says so, the
    // proxy's next checks take it out of the write backend, and every
    // write through the proxy lands on the other two.
    admin(&format!(
        "ALTER ROLE {role} IN DATABASE {name} SET default_transaction_read_only = on; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
    ))
    .await;
    raft_state_becomes(&client, addrs[2], "follower").await;
    let (_, _, health) = through(&client, addrs[2], Method::GET, "/health", None).await;
    assert_eq!(health["details"]["backend"]["state"], "follower", "{health}");
    // Sent to it straight, a start is refused: only the proxy's routing
    // keeps the writes below from it.
    let start = json!({"id": "straight", "goals": ["echo"], "init": {"x": [0]}});
    let (status, _, body) = through(&client, addrs[2], Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 503, "{body}");
    // Two rounds of the write backend's checks (every 3 s, one to fall).
    tokio::time::sleep(Duration::from_secs(7)).await;
    let statuses = start_flows(&client, &proxy, "after", 12).await;
    assert!(
        statuses.iter().all(|s| *s == 201),
        "every write reached an engine that takes writes: {statuses:?}"
    );
    // Reads are served by all three, the read-only one included.
    all_complete(&client, &proxy, "after", 12).await;
    let (status, _, flow) = through(&client, addrs[2], Method::GET, "/engine/flow/after-0", None).await;
    assert_eq!((status, &flow["status"]), (200, &json!("completed")), "{flow}");

    // Writable again, it says `leader` again.
    admin(&format!(
        "ALTER ROLE {role} IN DATABASE {name} RESET default_transaction_read_only; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
    ))
    .await;
    raft_state_becomes(&client, addrs[2], "leader").await;

    drop(engines);
    admin(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'; DROP ROLE IF EXISTS {role}"
    ))
    .await;
}
