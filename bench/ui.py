"""The dashboard's speed (docs/ui.md; results in BENCHMARKS.md).

    cargo build --release
    python3 bench/ui.py target/release/tartan [--flows 100000]

1. A flow of 1,000 work items (a for_each over 1,000 elements): the time
   from opening its page to every item's line and the event log being on
   the page, in Chromium, five times; the median and the slowest.
2. With --flows N, N more flows (a quarter of them failing at one step):
   the Flows page's first page, ten pages on by cursor, and the failed-step
   filter, each timed from the click to the rows on the page.

Needs what the browser test needs (tests/ui/requirements.txt, Chromium).
Timings are this machine's, shared and noisy: read them as a bound, not a
figure to compare runs by.
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "ui"))

import browser  # noqa: E402  (the browser test's engine start and API client)
import steps  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402


def start_many(api, n):
    """Start n flows, 64 at a time; every fourth one fails at `refuse`."""
    def one(i):
        goal = "refuse" if i % 4 == 0 else "shout"
        body = json.dumps({"id": f"bulk-{i:06d}", "goals": [goal], "init": {"greeting": ["hi"]}}).encode()
        req = urllib.request.Request(api.base + "/engine/flow", data=body, method="POST")
        req.add_header("Authorization", f"Bearer {browser.FULL}")
        req.add_header("Content-Type", "application/json")
        for _ in range(50):
            try:
                with urllib.request.urlopen(req, timeout=60) as res:
                    return res.status
            except urllib.error.HTTPError as e:
                if e.code != 503:
                    raise
                time.sleep(0.2)
        raise SystemExit("the engine stayed overloaded")
    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        for done, _ in enumerate(pool.map(one, range(n)), 1):
            if done % 10000 == 0:
                print(f"  {done} flows started ({time.time() - started:.0f} s)", flush=True)


def timed(page, action, ready):
    """Milliseconds from `action` to `ready` (a JS condition) being true."""
    t0 = page.evaluate("performance.now()")
    action()
    page.wait_for_function(ready, timeout=60000)
    return page.evaluate("performance.now()") - t0


def main():
    args = argparse.ArgumentParser()
    args.add_argument("tartan")
    args.add_argument("--flows", type=int, default=0)
    opts = args.parse_args()
    folder = os.path.abspath(os.path.join("target", "bench-ui"))
    os.makedirs(folder, exist_ok=True)
    db = os.path.join(folder, "ui.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    server, steps_url = steps.serve()
    engine, base = browser.start_engine(opts.tartan, folder)
    api = browser.Api(base)
    try:
        api.step("shout", "Shout", f"{steps_url}/ok", ["greeting"], ["shout"])
        api.step("refuse", "Refuse", f"{steps_url}/xss", ["greeting"], ["never"])
        each = {"id": "each", "name": "Each", "type": "sync", "http": {"endpoint": f"{steps_url}/ok"},
                "attributes": {"names": {"role": "required", "type": "array", "required": {"for_each": True}},
                               "shout": {"role": "output", "type": "string"}},
                "work_config": {"parallelism": 50}}
        status, answer = api.call("POST", "/engine/step", each)
        assert status == 201, answer
        api.start("thousand", "each", {"names": [[f"g{i}" for i in range(1000)]]})
        deadline = time.time() + 300
        while api.status("thousand") == "active" and time.time() < deadline:
            time.sleep(0.5)
        print(f"flow of 1,000 items: {api.status('thousand')}")
        if opts.flows:
            start_many(api, opts.flows)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=browser.CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            # Its timing predicates are strings Playwright evaluates: the
            # page's CSP (no eval) would refuse them.
            page = b.new_page(viewport={"width": 1280, "height": 900}, bypass_csp=True)
            browser.sign_in(page, base, browser.FULL, "#/overview")
            page.locator(".tile").first.wait_for()
            runs = []
            for i in range(5):
                page.goto(f"{base}/ui/#/overview")
                page.locator(".tile").first.wait_for()
                runs.append(timed(
                    page, lambda: page.goto(f"{base}/ui/#/flow/thousand"),
                    "document.querySelectorAll('#step-each details.item').length === 1000"
                    " && document.querySelectorAll('ol.log li').length > 0"))
            print(f"flow page, 1,000 work items: median {statistics.median(runs):.0f} ms, "
                  f"slowest {max(runs):.0f} ms ({', '.join(f'{r:.0f}' for r in runs)})")
            if opts.flows:
                page.goto(f"{base}/ui/#/overview")
                page.locator(".tile").first.wait_for()
                first = timed(page, lambda: page.goto(f"{base}/ui/#/flows"),
                              "document.querySelectorAll('table.list tbody tr').length === 50")
                deep = []
                for _ in range(10):
                    marker = page.locator("table.list tbody tr td a").first.inner_text()
                    deep.append(timed(page, lambda: page.get_by_role("button", name="Older →").click(),
                                      f"document.querySelector('table.list tbody tr td a')?.textContent !== {json.dumps(marker)}"))
                filtered = timed(page, lambda: page.goto(f"{base}/ui/#/flows?status=failed&step=refuse"),
                                 "document.querySelectorAll('table.list tbody tr').length === 50"
                                 " && document.querySelector('table.list tbody tr td.bad')?.textContent === 'refuse'")
                print(f"flows page over {opts.flows + 1} flows: first page {first:.0f} ms; "
                      f"ten pages on, each {statistics.median(deep):.0f} ms median, {max(deep):.0f} ms slowest; "
                      f"failed-step filter {filtered:.0f} ms")
            b.close()
    finally:
        engine.terminate()
        engine.wait(timeout=60)
        server.shutdown()


if __name__ == "__main__":
    main()
