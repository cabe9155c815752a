//! Requests as they are on the wire, for what a client library would not
//! send: HTTP/2 with prior knowledge (and any authority), and raw HTTP/1
//! (any `Host`, none, an absolute-form target, a WebSocket handshake).

use std::time::Duration;

use axum::body::Bytes;

/// An HTTP/2 connection with prior knowledge (no upgrade, no TLS): a
/// request sender, and the task driving the connection, which ends when
/// the server closes it.
pub async fn h2_connect(addr: &str) -> (h2::client::SendRequest<Bytes>, tokio::task::JoinHandle<()>) {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let (sender, connection) = h2::client::handshake(tcp)
        .await
        .unwrap_or_else(|e| panic!("HTTP/2 handshake: {e}"));
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (sender, driver)
}

/// `GET path` over an HTTP/2 connection, naming `authority`: the status and
/// the body.
pub async fn h2_get(
    sender: &mut h2::client::SendRequest<Bytes>,
    authority: &str,
    path: &str,
) -> (u16, String) {
    let ready = sender.clone().ready().await;
    let mut ready = ready.unwrap_or_else(|e| panic!("HTTP/2 connection: {e}"));
    let request = axum::http::Request::get(format!("http://{authority}{path}"))
        .body(())
        .unwrap_or_else(|e| panic!("request: {e}"));
    let (response, _) = ready
        .send_request(request, true)
        .unwrap_or_else(|e| panic!("sending: {e}"));
    let response = response.await.unwrap_or_else(|e| panic!("response: {e}"));
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut read = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap_or_else(|e| panic!("body: {e}"));
        let _ = body.flow_control().release_capacity(chunk.len());
        read.extend_from_slice(&chunk);
    }
    (status, String::from_utf8_lossy(&read).into_owned())
}

/// Send `request` (raw HTTP/1) on a new connection and read the answer: its
/// status, its head, and its body (by `Content-Length`; a `101` has none).
/// Waits at most `bound`; a status of 0 means nothing came.
pub async fn raw_request(addr: &str, request: &str, bound: Duration) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .write_all(request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
    let mut read = Vec::new();
    let _ = tokio::time::timeout(bound, async {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&read[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if read.len() >= end + 4 + length {
                    return;
                }
            }
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&read).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}
