//! Event streams: server-sent events, the WebSocket, slow clients.

mod slow_streams;
mod sse;
mod ws;
