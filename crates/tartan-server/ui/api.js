// Talking to the engine: the same API curl and the CLI use, on the same
// address the page came from, so no CORS setting is needed. The token is a
// bearer header held in sessionStorage, never a cookie: no other site can
// make the browser send it (docs/ui.md, "Security").

const KEY = "tartan.token";

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

/** An answer other than 2xx, with its problem+json detail when it has one. */
export class Refused extends Error {
  constructor(status, problem) {
    const detail = problem && (problem.detail || problem.title);
    super(detail ? `${status}: ${detail}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function answer(res) {
  const type = res.headers.get("content-type") || "";
  const body = type.includes("json") ? await res.json().catch(() => null) : await res.text();
  if (!res.ok) throw new Refused(res.status, typeof body === "object" ? body : { detail: body });
  return body;
}

export async function get(path, signal) {
  return answer(await fetch(path, { headers: headers(), signal }));
}

export async function post(path, body, signal) {
  return answer(await fetch(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body ?? {}),
    signal,
  }));
}

export async function text(path, signal) {
  const res = await fetch(path, { headers: headers({ Accept: "text/plain" }), signal });
  if (!res.ok) throw new Refused(res.status, await res.json().catch(() => null));
  return res.text();
}

/** Encode one path segment (ids may hold `+`, `.` and spaces). */
export function seg(id) {
  return encodeURIComponent(id);
}

/**
 * Follow a server-sent event stream with fetch, so the token goes in a
 * header rather than in the URL. `onEvent({event, id, data})` gets each
 * message; the stream reconnects after a break from the last id it saw,
 * until `signal` aborts.
 */
export async function stream(path, onEvent, signal, onOpen, onClose) {
  let last = "";
  let wait = 500;
  while (!signal.aborted) {
    let ended = false;
    try {
      const h = headers({ Accept: "text/event-stream" });
      if (last) h["Last-Event-ID"] = last;
      const res = await fetch(path, { headers: h, signal });
      if (!res.ok) {
        const problem = await res.json().catch(() => null);
        if (res.status >= 400 && res.status < 500) throw new Refused(res.status, problem);
        throw new Error(`HTTP ${res.status}`);
      }
      if (onOpen) onOpen();
      wait = 500;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        // Look for the end of a message only in what is new (and the
        // three characters before it), not the whole buffer again.
        let from = Math.max(0, buffer.length - 3);
        buffer += value;
        let cut;
        while ((cut = buffer.slice(from).search(/\r?\n\r?\n/)) >= 0) {
          cut += from;
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
          from = 0;
          const message = parse(block);
          if (message.id) last = message.id;
          // `dropped` (this reader fell behind) and `error` end a stream
          // that is resumed from `last`; `state` is a flow stream's end.
          if (message.event === "dropped" || message.event === "error") continue;
          if (message.event === "state") ended = true;
          if (message.data === undefined) continue;
          try {
            onEvent(message);
          } catch (e) {
            console.error(e);
          }
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof Refused) throw e;
    }
    if (ended) return;
    if (onClose) onClose();
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 10000);
  }
}

function parse(block) {
  const message = { event: "message" };
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") data.push(value);
    else if (field === "event") message.event = value;
    else if (field === "id") message.id = value;
  }
  if (data.length) {
    try { message.data = JSON.parse(data.join("\n")); } catch { message.data = data.join("\n"); }
  }
  return message;
}

/**
 * Read a page's data now, then every `everyMs` until `ctx.signal` aborts,
 * for what has no stream of its own; the next read is due whether this
 * one worked or not (a failure is `ctx.refused`'s). The first read's
 * failure is the caller's, as the page's render fails with it.
 */
export async function every(everyMs, load, ctx) {
  let timer = null;
  async function poll() {
    try {
      await load();
    } catch (e) {
      ctx.refused(e);
    }
    if (!ctx.signal.aborted) timer = setTimeout(poll, everyMs);
  }
  ctx.signal.addEventListener("abort", () => clearTimeout(timer));
  await load();
  if (!ctx.signal.aborted) timer = setTimeout(poll, everyMs);
}
