"""Step endpoints for the browser test (docs/ui.md, "The browser test"):
real HTTP on 127.0.0.1, port 0, in a thread.

- POST /flaky/<key>: 503 with Retry-After: 0 twice per key, then 200
  {"greeting": ...}; how many calls each key got is in `calls`.
- POST /once/<key>: 503 once per key, then 200 {"hourly": "ok"} (a step
  whose retry waits an hour, for "Retry now").
- POST /slow: answers after 30 s (a flow to cancel while it runs).
- POST /xss: 400 with a problem whose detail holds markup.
- POST /echo: 200 {"echo": the shout it was given}.
- POST /ok: 200 {"shout": ...}.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

calls = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.startswith("/flaky/"):
            key = self.path[len("/flaky/"):]
            with lock:
                calls[key] = calls.get(key, 0) + 1
                n = calls[key]
            if n <= 2:
                self.answer(503, {"detail": f"try {n}: not yet"}, [("Retry-After", "0")])
            else:
                self.answer(200, {"greeting": f"Hello, {body.get('name')}!"})
        elif self.path.startswith("/once/"):
            key = self.path[len("/once/"):]
            with lock:
                calls[key] = calls.get(key, 0) + 1
                n = calls[key]
            if n == 1:
                self.answer(503, {"detail": "down for an hour"})
            else:
                self.answer(200, {"hourly": "ok"})
        elif self.path == "/echo":
            self.answer(200, {"echo": str(body.get("shout", ""))})
        elif self.path == "/xss":
            self.answer(400, {"title": "Bad", "status": 400,
                              "detail": "<script>window.__xss=1</script><img src=x onerror=window.__xss=2>"})
        elif self.path == "/slow":
            time.sleep(30)
            self.answer(200, {"greeting": "late"})
        else:
            self.answer(200, {"shout": str(body.get("greeting", "")).upper()})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A caller that hung up (an attempt timed out, the engine stopped)
        # is no error of this server's.
        pass


def serve():
    """Start the server; return (server, base URL)."""
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


if __name__ == "__main__":
    _, url = serve()
    print(url, flush=True)
    threading.Event().wait()
