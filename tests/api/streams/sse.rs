//! The event streams (docs/api.md, "Event streams"): `GET
//! /engine/flow/{id}/stream`, a flow's events as server-sent events, history
//! then live then its final state; `GET /engine/events/stream`, every flow's
//! events by global position, filtered; both resumable, bounded, behind the
//! API's tokens, and fed by every process on one Postgres.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::helpers::*;
use tartan_testkit::both_backends;

both_backends!(
    a_running_flow_streams_its_events_in_order_then_its_state,
    a_finished_flow_streams_its_history_then_its_state,
    a_stream_resumes_after_last_event_id,
    bad_resume_points_and_unknown_flows_are_problems,
    the_global_stream_carries_every_flows_events_by_position,
    the_global_stream_filters_and_resumes,
    the_global_stream_starts_at_the_present,
    bad_global_stream_filters_are_problems,
    a_global_stream_past_the_byte_bound_is_dropped_and_resumes_without_a_gap,
);

/// One server-sent message.
#[derive(Debug, Clone)]
struct Message {
    id: Option<String>,
    event: String,
    data: Value,
}

/// An open stream, read message by message.
struct Stream {
    resp: reqwest::Response,
    buffer: String,
}

impl Stream {
    /// The next message; `None` once the stream has ended. Keep-alive
    /// comments are skipped.
    async fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut message = Message {
                    id: None,
                    event: "message".into(),
                    data: Value::Null,
                };
                let mut data = String::new();
                let mut any = false;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        message.id = Some(v.trim().to_string());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("event:") {
                        message.event = v.trim().to_string();
                        any = true;
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                        any = true;
                    }
                }
                if !any {
                    continue;
                }
                message.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(message);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.resp.chunk())
                .await
                .expect("a message within 30 s")
                .expect("reading the stream");
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return None,
            }
        }
    }

    /// Every message until the stream ends.
    async fn rest(&mut self) -> Vec<Message> {
        let mut all = Vec::new();
        while let Some(m) = self.next().await {
            all.push(m);
            assert!(all.len() < 10_000, "the stream does not end");
        }
        all
    }
}

async fn open(app: &TestApp, path: &str, last_event_id: Option<&str>) -> Stream {
    let mut req = app.client.get(app.url(path));
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id);
    }
    let resp = req.send().await.expect("stream request");
    assert_eq!(resp.status(), reqwest::StatusCode::OK, "{path}");
    assert_eq!(
        resp.headers().get("content-type").and_then(|v| v.to_str().ok()),
        Some("text/event-stream"),
    );
    Stream {
        resp,
        buffer: String::new(),
    }
}

/// The messages carry exactly the stored events, in order, each with its
/// sequence as id, then the final state, and nothing after.
async fn assert_history_then_state(app: &TestApp, id: &str, messages: &[Message], after: usize) {
    let stored = events(app, id).await;
    let (last, events) = messages.split_last().expect("messages");
    assert_eq!(events.len(), stored.len() - after, "{messages:?}");
    for (m, e) in events.iter().zip(&stored[after..]) {
        assert_eq!(m.data, *e);
        assert_eq!(m.event, e["type"].as_str().unwrap());
        assert_eq!(m.id.as_deref(), Some(e["sequence"].to_string().as_str()));
    }
    assert_eq!(last.event, "state");
    assert_eq!(last.data, app.flow(id).await);
    assert!(!last.data["deactivated_at"].is_null());
}

async fn a_running_flow_streams_its_events_in_order_then_its_state(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let gate = Arc::new(Notify::new());
    let _svc = three_steps(&app, Some(gate.clone())).await;
    let r = app
        .start_flow(&json!({"id": "s1", "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let mut stream = open(&app, "/engine/flow/s1/stream", None).await;
    // The history so far, then the rest live once the first step answers.
    let first = stream.next().await.expect("a first event");
    assert_eq!(first.event, "flow_started");
    assert_eq!(first.id.as_deref(), Some("1"));
    gate.notify_one();
    let mut messages = vec![first];
    messages.extend(stream.rest().await);
    assert_history_then_state(&app, "s1", &messages, 0).await;
    assert_eq!(messages.last().unwrap().data["status"], "completed");
    let kinds: Vec<&str> = messages.iter().map(|m| m.event.as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "work_succeeded").count(),
        3,
        "{kinds:?}"
    );
}

/// Run the three-step flow `id` to its end.
async fn finished_flow(app: &TestApp, id: &str) -> StepServer {
    let svc = three_steps(app, None).await;
    let r = app
        .start_flow(&json!({"id": id, "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow(id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    svc
}

async fn a_finished_flow_streams_its_history_then_its_state(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = finished_flow(&app, "done").await;
    let messages = open(&app, "/engine/flow/done/stream", None).await.rest().await;
    assert_history_then_state(&app, "done", &messages, 0).await;
}

async fn a_stream_resumes_after_last_event_id(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = finished_flow(&app, "again").await;
    let total = events(&app, "again").await.len();
    for after in [1, 4, total - 1] {
        let header = open(&app, "/engine/flow/again/stream", Some(&after.to_string()))
            .await
            .rest()
            .await;
        assert_history_then_state(&app, "again", &header, after).await;
        let query = open(&app, &format!("/engine/flow/again/stream?after={after}"), None)
            .await
            .rest()
            .await;
        assert_history_then_state(&app, "again", &query, after).await;
    }
    // Last-Event-ID wins over `after` (a browser reconnects to the same URL).
    let resumed = open(&app, "/engine/flow/again/stream?after=1", Some("3"))
        .await
        .rest()
        .await;
    assert_history_then_state(&app, "again", &resumed, 3).await;
    // Resumed after the last event: only the state.
    let end = open(&app, "/engine/flow/again/stream", Some(&total.to_string()))
        .await
        .rest()
        .await;
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(end[0].event, "state");
}

async fn bad_resume_points_and_unknown_flows_are_problems(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let r = app.get("/engine/flow/nope/stream").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.content_type, "application/problem+json");
    assert!(
        r.body["detail"].as_str().unwrap().contains("nope"),
        "{:?}",
        r.body
    );
    let _svc = finished_flow(&app, "f").await;
    for bad in ["-1", "x", "1.5", "99999999999999999999"] {
        let r = app.get(&format!("/engine/flow/f/stream?after={bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(
            r.body["detail"].as_str().unwrap().starts_with("after"),
            "{:?}",
            r.body
        );
        let resp = app
            .client
            .get(app.url("/engine/flow/f/stream"))
            .header("Last-Event-ID", bad)
            .send()
            .await
            .unwrap();
        let (r, _) = read_reply(resp).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(
            r.body["detail"].as_str().unwrap().starts_with("Last-Event-ID"),
            "{:?}",
            r.body
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_past_the_limit_are_refused_until_one_closes() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_on_with(db, "streams", |c| c.max_streams = 1).await;
    let _svc = finished_flow(&app, "held").await;
    // A running flow keeps its stream open: its first step waits on a
    // gate nobody opens again.
    let r = app
        .start_flow(&json!({"id": "open", "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let first = open(&app, "/engine/flow/open/stream", None).await;
    let r = app.get("/engine/flow/held/stream").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{:?}", r.body);
    assert_eq!(r.content_type, "application/problem+json");
    assert!(
        r.body["detail"].as_str().unwrap().contains("streams"),
        "{:?}",
        r.body
    );
    drop(first);
    // The slot comes back once the server sees the client gone.
    for _ in 0..200 {
        let resp = app
            .client
            .get(app.url("/engine/flow/held/stream"))
            .send()
            .await
            .unwrap();
        if resp.status() == reqwest::StatusCode::OK {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the slot of a closed stream was not given back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_or_access_token_opens_a_stream() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let security = tartan_server::ApiSecurity::new(
        &["full-token-0123456789".into()],
        &["read-token-0123456789".into()],
        &[],
    )
    .expect("tokens");
    let app = start_secured(db, "streams", security).await;
    let svc = StepServer::start(|_, _| json_reply(200, json!({"x": "1"}))).await;
    let step = sync_step("a", &svc.url("/a"), &["seed"], &["x"]);
    let r = app
        .client
        .post(app.url("/engine/step"))
        .bearer_auth("full-token-0123456789")
        .json(&step)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::CREATED);
    let r = app
        .client
        .post(app.url("/engine/flow"))
        .bearer_auth("full-token-0123456789")
        .json(&json!({"id": "t", "goals": ["a"], "init": {"seed": ["s"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::CREATED);

    let status = |r: reqwest::Response| r.status().as_u16();
    let get = |url: String| app.client.get(url);
    assert_eq!(
        status(get(app.url("/engine/flow/t/stream")).send().await.unwrap()),
        401
    );
    assert_eq!(
        status(
            get(app.url("/engine/flow/t/stream?access_token=wrong"))
                .send()
                .await
                .unwrap()
        ),
        401
    );
    // Only the streams take the token from the query.
    assert_eq!(
        status(
            get(app.url("/engine/flow/t/events?access_token=read-token-0123456789"))
                .send()
                .await
                .unwrap()
        ),
        401
    );
    for resp in [
        get(app.url("/engine/flow/t/stream?access_token=read-token-0123456789"))
            .send()
            .await
            .unwrap(),
        get(app.url("/engine/flow/t/stream"))
            .bearer_auth("read-token-0123456789")
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
        let messages = Stream {
            resp,
            buffer: String::new(),
        }
        .rest()
        .await;
        assert_eq!(
            messages.last().map(|m| m.event.as_str()),
            Some("state"),
            "{messages:?}"
        );
    }
}

/// With a bus of one decision, a stream misses events as soon as two
/// decisions commit together: it is told where it stopped, and resuming
/// there gets exactly the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_falls_behind_is_dropped_and_resumes_without_loss() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let app = start_on_with(db, "streams", |c| c.stream_buffer = 1).await;
    let gate = Arc::new(Notify::new());
    let _svc = three_steps(&app, Some(gate.clone())).await;
    let quick = StepServer::start(|_, _| json_reply(200, json!({"q": "1"}))).await;
    app.register(&sync_step("quick", &quick.url("/q"), &["seed"], &["q"]))
        .await;
    let r = app
        .start_flow(&json!({"id": "watched", "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let mut stream = open(&app, "/engine/flow/watched/stream", None).await;
    let mut messages = vec![stream.next().await.expect("flow_started")];
    // Many decisions at once: some commit in the same batch.
    let starts = (0..100).map(|k| {
        let app = &app;
        async move {
            let body = json!({"id": format!("other-{k}"), "goals": ["quick"], "init": {"seed": ["s"]}});
            assert_eq!(app.start_flow(&body).await.status, StatusCode::CREATED);
        }
    });
    futures::future::join_all(starts).await;
    gate.notify_one();
    messages.extend(stream.rest().await);
    let last = messages.last().expect("messages").clone();
    assert_eq!(last.event, "dropped", "{messages:?}");
    let resume_at = last.data["last_event_id"]
        .as_str()
        .expect("last_event_id")
        .to_string();
    assert!(last.data["detail"].is_string());
    let sent = &messages[..messages.len() - 1];
    assert_eq!(
        sent.last().and_then(|m| m.id.clone()).as_deref(),
        Some(resume_at.as_str())
    );
    let mut all: Vec<Message> = sent.to_vec();
    app.wait_for_flow("watched").await;
    all.extend(
        open(&app, "/engine/flow/watched/stream", Some(&resume_at))
            .await
            .rest()
            .await,
    );
    assert_history_then_state(&app, "watched", &all, 0).await;
}

/// A client that stops reading while flows answer 128 KiB each (half a
/// megabyte of events a flow, 50 MB in all, far more than the sockets
/// buffer): its stream stops being read, and falls behind by more than the
/// bus's 1 MiB (though by fewer decisions than `stream_buffer`). Once it
/// reads again it gets what was written, then where it stopped, as the
/// message's id too; resuming there gets exactly the rest.
async fn a_global_stream_past_the_byte_bound_is_dropped_and_resumes_without_a_gap(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let app = start_on_with(db, "streams", |c| c.stream_buffer_bytes = 1024 * 1024).await;
    let out = "x".repeat(128 * 1024);
    let svc = StepServer::start(move |_, _| json_reply(200, json!({"out": out}))).await;
    app.register(&sync_step("large", &svc.url("/large"), &["seed"], &["out"]))
        .await;
    let mut stream = open(&app, "/engine/events/stream?after=0", None).await;
    const FLOWS: usize = 100;
    let ids: Vec<String> = (0..FLOWS).map(|k| format!("large-{k:03}")).collect();
    for chunk in ids.chunks(10) {
        let starts = chunk.iter().map(|id| {
            let app = &app;
            async move {
                let body = json!({"id": id, "goals": ["large"], "init": {"seed": ["s"]}});
                assert_eq!(app.start_flow(&body).await.status, StatusCode::CREATED);
                assert_eq!(app.wait_for_flow(id).await["status"], "completed");
            }
        });
        futures::future::join_all(starts).await;
    }
    let mut total = 0;
    for id in &ids {
        let r = app.get(&format!("/engine/flow/{id}/events?limit=1000")).await;
        assert_eq!(r.body["next"], Value::Null, "one page: {:?}", r.body["count"]);
        total += r.body["count"].as_u64().unwrap() as usize;
    }
    let messages = stream.rest().await;
    let (last, sent) = messages.split_last().expect("messages");
    assert_eq!(last.event, "dropped", "{} messages", messages.len());
    let resume = last.data["last_event_id"]
        .as_str()
        .expect("last_event_id")
        .to_string();
    assert_eq!(last.id.as_deref(), Some(resume.as_str()));
    let resume: usize = resume.parse().unwrap();
    assert!(
        resume < total / 2,
        "{resume} of {total} reached a client that read nothing"
    );
    let sent_ids: Vec<String> = sent.iter().filter_map(|m| m.id.clone()).collect();
    let expected: Vec<String> = (1..=resume).map(|p| p.to_string()).collect();
    assert_eq!(sent_ids, expected);
    let mut resumed = open(&app, "/engine/events/stream", Some(&resume.to_string())).await;
    let rest = take(&mut resumed, total - resume).await;
    let rest_ids: Vec<String> = rest.iter().filter_map(|m| m.id.clone()).collect();
    let expected: Vec<String> = (resume + 1..=total).map(|p| p.to_string()).collect();
    assert_eq!(rest_ids, expected);
    let finished = sent
        .iter()
        .chain(&rest)
        .filter(|m| m.event == "flow_deactivated")
        .count();
    assert_eq!(finished, FLOWS);
}

/// The next `n` messages of a stream that does not end.
async fn take(stream: &mut Stream, n: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        out.push(stream.next().await.expect("the global stream does not end"));
    }
    out
}

/// Start flow `id` on the three steps (registered already) and wait for it.
async fn run_flow(app: &TestApp, id: &str) {
    let r = app
        .start_flow(&json!({"id": id, "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let flow = app.wait_for_flow(id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
}

/// A global stream's message is the stored event and its position.
fn without_position(m: &Message) -> Value {
    let mut data = m.data.clone();
    let position = data.as_object_mut().and_then(|o| o.remove("position"));
    assert_eq!(position.map(|p| p.to_string()), m.id, "{m:?}");
    data
}

async fn the_global_stream_carries_every_flows_events_by_position(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let mut stream = open(&app, "/engine/events/stream?after=0", None).await;
    let _svc = finished_flow(&app, "g1").await;
    run_flow(&app, "g2").await;
    let (e1, e2) = (events(&app, "g1").await, events(&app, "g2").await);
    let messages = take(&mut stream, e1.len() + e2.len()).await;
    // Positions 1, 2, 3, ... with nothing skipped or repeated.
    let ids: Vec<String> = messages
        .iter()
        .map(|m| m.id.clone().unwrap_or_default())
        .collect();
    let expected: Vec<String> = (1..=messages.len()).map(|p| p.to_string()).collect();
    assert_eq!(ids, expected);
    // Each flow's events in its own order, exactly as stored.
    for (id, stored) in [("g1", &e1), ("g2", &e2)] {
        let of_flow: Vec<Value> = messages
            .iter()
            .filter(|m| m.data["aggregate_id"] == json!(["flow", id]))
            .map(without_position)
            .collect();
        assert_eq!(&of_flow, stored, "{id}");
    }
    // g2 started after g1 completed: all of g1 comes first.
    let first_g2 = messages
        .iter()
        .position(|m| m.data["aggregate_id"][1] == "g2")
        .unwrap();
    assert_eq!(first_g2, e1.len());
}

async fn the_global_stream_filters_and_resumes(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = finished_flow(&app, "keep-1").await;
    run_flow(&app, "skip-1").await;
    run_flow(&app, "keep-2").await;
    let path = "/engine/events/stream?after=0&flow_prefix=keep-&type=flow_started,flow_completed";
    let mut stream = open(&app, path, None).await;
    let messages = take(&mut stream, 4).await;
    let seen: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            (
                m.event.clone(),
                m.data["aggregate_id"][1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("flow_started".into(), "keep-1".into()),
            ("flow_completed".into(), "keep-1".into()),
            ("flow_started".into(), "keep-2".into()),
            ("flow_completed".into(), "keep-2".into()),
        ]
    );
    for m in &messages {
        assert_eq!(m.data["type"], m.event.as_str());
    }
    // Resumed after the second message, the same URL gives the third on.
    let mut resumed = open(&app, path, messages[1].id.as_deref()).await;
    let again = take(&mut resumed, 2).await;
    assert_eq!(again[0].id, messages[2].id);
    assert_eq!(again[1].id, messages[3].id);
    assert_eq!(again[1].data, messages[3].data);
    // A live event that matches arrives after the stored ones.
    run_flow(&app, "keep-3").await;
    let live = take(&mut resumed, 2).await;
    assert_eq!(live[0].data["aggregate_id"][1], "keep-3");
    assert_eq!(live[0].event, "flow_started");
    assert_eq!(live[1].event, "flow_completed");
}

async fn the_global_stream_starts_at_the_present(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let _svc = finished_flow(&app, "old").await;
    let mut stream = open(&app, "/engine/events/stream", None).await;
    run_flow(&app, "new").await;
    let first = take(&mut stream, 1).await.remove(0);
    assert_eq!(first.event, "flow_started");
    assert_eq!(first.data["aggregate_id"], json!(["flow", "new"]));
    let old = events(&app, "old").await.len();
    assert_eq!(first.id, Some((old + 1).to_string()));
}

async fn bad_global_stream_filters_are_problems(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let long = "p".repeat(257);
    for (query, names) in [
        ("type=flow_started,nope".to_string(), "nope"),
        (format!("flow_prefix={long}"), "flow_prefix"),
        ("after=-1".to_string(), "after"),
        ("after=x".to_string(), "after"),
    ] {
        let r = app.get(&format!("/engine/events/stream?{query}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(r.content_type, "application/problem+json");
        assert!(
            r.body["detail"].as_str().unwrap().contains(names),
            "{query}: {:?}",
            r.body
        );
    }
}

/// Two engines on one Postgres: a flow run by one is seen live, in order,
/// on the other's streams, the flow's and the global one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_carry_the_events_of_other_processes() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let a = start_on(TestDb::at_url(db.url.clone()), "node-a").await;
    let b = start_on(TestDb::at_url(db.url.clone()), "node-b").await;
    let gate = Arc::new(Notify::new());
    let _svc = three_steps(&a, Some(gate.clone())).await;
    let mut global = open(&b, "/engine/events/stream", None).await;
    let r = a
        .start_flow(&json!({"id": "far", "goals": ["c"], "init": {"seed": ["s"]}}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let mut flow = open(&b, "/engine/flow/far/stream", None).await;
    let first = flow.next().await.expect("a first event");
    assert_eq!(first.event, "flow_started");
    // The rest happens on `a` after both streams are open on `b`.
    gate.notify_one();
    let mut messages = vec![first];
    messages.extend(flow.rest().await);
    let flow_state = a.wait_for_flow("far").await;
    assert_eq!(flow_state["status"], "completed");
    assert_history_then_state(&b, "far", &messages, 0).await;
    let stored = events(&a, "far").await;
    let seen: Vec<Value> = take(&mut global, stored.len())
        .await
        .iter()
        .map(without_position)
        .collect();
    assert_eq!(seen, stored);
}
