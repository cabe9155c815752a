"""The dashboard in a real browser (docs/ui.md, "The browser test").

Starts the tartan binary given as the first argument on a fresh SQLite
file with a full and a read token, and a step server (steps.py), then
drives Debian's Chromium with Playwright:

- a flow whose step fails twice (503) then succeeds: its page shows the
  countdown to the retry, then three attempts with 503, 503 and 200;
- a flow cancelled from its page is cancelled, as the API says;
- with the read token, the actions are disabled;
- a step name and an error message holding markup render as text;
- axe-core finds no serious or critical violation on any page.

With UI_SCREENSHOTS=<dir>, it saves a screenshot of each page there (the
ones docs/ui.md and the README show). Exits non-zero on the first failure.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect, sync_playwright

import steps

FULL = "ui-test-full-token-0123456789"
READ = "ui-test-read-token-0123456789"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
XSS = "<script>window.__xss=1</script><img src=x onerror=window.__xss=2>"


def start_engine(binary, folder):
    log = open(os.path.join(folder, "tartan.log"), "w+")
    env = dict(os.environ, RUST_LOG="info")
    proc = subprocess.Popen(
        [os.path.abspath(binary), "serve", "--listen", "127.0.0.1:0",
         "--database-url", f"sqlite://{folder}/ui.db",
         "--api-token", FULL, "--read-token", READ],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder)
    deadline = time.time() + 60
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"listening on (127\.0\.0\.1:\d+)", log.read())
        if m:
            return proc, f"http://{m.group(1)}"
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    log.seek(0)
    raise SystemExit(f"tartan did not start:\n{log.read()}")


class Api:
    def __init__(self, base):
        self.base = base

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {FULL}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return res.status, json.loads(res.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def step(self, step_id, name, endpoint, needs, gives, work_config=None):
        attrs = {n: {"role": "required", "type": "string"} for n in needs}
        attrs.update({n: {"role": "output", "type": "string"} for n in gives})
        body = {"id": step_id, "name": name, "type": "sync",
                "http": {"endpoint": endpoint, "timeout": "40s"}, "attributes": attrs}
        if work_config:
            body["work_config"] = work_config
        status, answer = self.call("POST", "/engine/step", body)
        assert status == 201, (status, answer)

    def start(self, flow_id, goal, init):
        status, answer = self.call("POST", "/engine/flow", {"id": flow_id, "goals": [goal], "init": init})
        assert status == 201, (status, answer)

    def status(self, flow_id):
        return self.call("GET", f"/engine/flow/{flow_id}/status")[1]["status"]


def sign_in(page, base, token, where):
    page.goto(f"{base}/ui/{where}")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()


def check_axe(page, what):
    # A toast fading in or out (.2 s) has text of partial opacity, which axe
    # measures as low contrast: judge the page with it at rest.
    page.wait_for_function(
        "() => ['0', '1'].includes(getComputedStyle(document.getElementById('toast')).opacity)")
    results = Axe().run(page)
    bad = [v for v in results.response["violations"] if v.get("impact") in ("serious", "critical")]
    assert not bad, f"{what}: " + json.dumps(
        [{"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]} for v in bad], indent=1)


def shot(page, name):
    folder = os.environ.get("UI_SCREENSHOTS")
    if folder:
        page.evaluate("document.getElementById('toast').className = 'toast'")
        page.wait_for_timeout(300)
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=False)


def main(binary):
    folder = tempfile.mkdtemp(prefix="tartan-ui-")
    server, steps_url = steps.serve()
    engine, base = start_engine(binary, folder)
    api = Api(base)
    try:
        run(api, base, steps_url)
    finally:
        engine.terminate()
        engine.wait(timeout=30)
        server.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    print("browser test: every check passed")


def run(api, base, steps_url):
    # Retries of 2 s then 4 s: long enough to see the countdown.
    api.step("greet", "Greet", f"{steps_url}/flaky/{{name}}", ["name"], ["greeting"],
             {"max_retries": 4, "init_backoff": 2000, "backoff_type": "exponential"})
    api.step("shout", "Shout", f"{steps_url}/ok", ["greeting"], ["shout"])
    api.step("wait", "Waits 30 s", f"{steps_url}/slow", ["name"], ["late"])
    api.step("xss", XSS, f"{steps_url}/xss", ["name"], ["never"])
    api.step("announce", "Announce", f"{steps_url}/echo", ["shout"], ["echo"])
    api.step("hourly", "Retries hourly", f"{steps_url}/once/{{name}}", ["name"], ["hourly"],
             {"max_retries": 2, "init_backoff": "1h", "max_backoff": "1h", "backoff_type": "fixed"})
    api.start("retried", "shout", {"name": ["ada"]})

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        # The flow that fails twice, then succeeds: the countdown, then
        # three attempts with their status codes.
        sign_in(page, base, FULL, "#/flow/retried")
        expect(page.locator("time.countdown").first).to_contain_text("retry in", timeout=15000)
        # The wait that runs is not told as waited.
        expect(page.locator("#step-greet table.attempts tbody tr").last).to_contain_text("waits ", timeout=5000)
        expect(page.locator("dl.facts").first).to_contain_text("running for")
        expect(page.locator(".timeline .tl-row").first.locator(".tl-wait")).to_contain_text("waiting")
        shot(page, "flow-retrying")
        expect(page.locator("h1 + .badge").first).to_have_text("completed", timeout=30000)
        greet = page.locator("#step-greet")
        rows = greet.locator("table.attempts tbody tr")
        expect(rows).to_have_count(3)
        codes = [rows.nth(i).locator("td.http").inner_text() for i in range(3)]
        assert codes == ["503", "503", "200"], codes
        expect(rows.nth(0)).to_contain_text("waited 2 s")
        # The timeline: greet's three attempts with the two waits between
        # them, then shout's one, in the plan's order.
        lines = page.locator(".timeline .tl-row")
        expect(lines).to_have_count(2)
        expect(lines.nth(0).locator(".tl-label")).to_have_text("greet")
        expect(lines.nth(0).locator(".tl-attempt")).to_have_count(3)
        expect(lines.nth(0).locator(".tl-wait")).to_have_count(2)
        expect(lines.nth(0).locator(".tl-wait").first).to_contain_text("waited 2 s before attempt 2")
        expect(lines.nth(1).locator(".tl-label")).to_have_text("shout")
        expect(lines.nth(1).locator(".tl-attempt.o-success")).to_have_count(1)
        expect(page.locator("dl.facts").first).to_contain_text("took")
        check_axe(page, "flow page")
        shot(page, "flow")

        # Cancel from the page; the API agrees.
        api.start("to-cancel", "wait", {"name": ["bob"]})
        page.goto(f"{base}/ui/#/flow/to-cancel")
        expect(page.locator("#step-wait .badge").first).to_have_text("active", timeout=15000)
        page.once("dialog", lambda d: d.accept())
        page.get_by_role("button", name="Cancel flow").click()
        deadline = time.time() + 15
        while api.status("to-cancel") != "cancelled" and time.time() < deadline:
            time.sleep(0.2)
        assert api.status("to-cancel") == "cancelled", api.status("to-cancel")
        expect(page.locator("h1 + .badge").first).to_have_text("cancelled", timeout=15000)

        # Steps, and the items waiting in them, are listed in the plan's
        # order (its layers), not by name: announce needs shout needs greet.
        api.start("ordered", "announce", {"name": ["eve"]})
        page.goto(f"{base}/ui/#/flow/ordered")
        expect(page.locator("#step-announce")).to_be_visible(timeout=15000)
        order = page.locator(".steps section.step").evaluate_all("els => els.map(e => e.id)")
        assert order == ["step-greet", "step-shout", "step-announce"], order
        # Ended, so that the Overview's count below is its own flow's.
        api.call("POST", "/engine/flow/ordered/cancel", {})
        deadline = time.time() + 15
        while api.status("ordered") == "active" and time.time() < deadline:
            time.sleep(0.2)
        assert api.status("ordered") == "cancelled", api.status("ordered")

        # An item waiting an hour for its retry: "Retry now" starts it at
        # once, and the wait reads as cut short.
        api.start("hour", "hourly", {"name": ["dee"]})
        page.goto(f"{base}/ui/#/flow/hour")
        retry_now = page.locator("#step-hourly").get_by_role("button", name="Retry now")
        expect(retry_now).to_be_visible(timeout=15000)
        expect(page.locator("#step-hourly table.attempts tbody tr").last).to_contain_text("waits 1 h")
        page.once("dialog", lambda d: d.accept())
        retry_now.click()
        expect(page.locator("h1 + .badge").first).to_have_text("completed", timeout=15000)
        rows = page.locator("#step-hourly table.attempts tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("of 1 h, retried now by request at")
        expect(page.locator("#step-hourly").get_by_role("button", name="Retry now")).to_have_count(0)
        assert api.status("hour") == "completed", api.status("hour")
        shot(page, "flow-retried-now")

        # A flow waiting for its turn on a concurrency key shows its place,
        # and runs once the flow ahead of it ends.
        for flow_id in ("turn-1", "turn-2"):
            status, made = api.call("POST", "/engine/flow", {
                "id": flow_id, "goals": ["wait"], "init": {"name": ["cy"]},
                "concurrency": {"key": "customer-9", "limit": 1}})
            assert status == 201, (status, made)
        page.goto(f"{base}/ui/#/flow/turn-2")
        expect(page.locator(".title .s-queued")).to_have_text("waiting for its turn: 1 of 1", timeout=15000)
        expect(page.locator("dl.facts").first).to_contain_text("customer-9 (limit 1; 1 running, 1 waiting)")
        shot(page, "flow-waiting-turn")
        api.call("POST", "/engine/flow/turn-1/cancel", {})
        expect(page.locator("#step-wait .badge").first).to_have_text("active", timeout=15000)
        expect(page.locator(".title .s-queued")).to_have_count(0)
        api.call("POST", "/engine/flow/turn-2/cancel", {})

        # Markup in a step's name and in an error is text.
        api.start("xss-flow", "xss", {"name": ["eve"]})
        deadline = time.time() + 15
        while api.status("xss-flow") == "active" and time.time() < deadline:
            time.sleep(0.2)
        page.goto(f"{base}/ui/#/flow/xss-flow")
        expect(page.locator("#step-xss")).to_contain_text(XSS, timeout=15000)
        expect(page.locator("#step-xss").locator("span.error").first).to_contain_text("<script>")
        assert page.evaluate("window.__xss") is None, "markup from the API ran"
        assert page.locator("img[src=x]").count() == 0

        # A schedule: listed with its next fire; fired now from the page,
        # its fire's flow linked.
        status, made = api.call("POST", "/engine/schedule", {
            "id": "nightly-shout", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
            "flow": {"goals": ["shout"], "init": {"name": ["ada"]}}})
        assert status == 201, (status, made)
        page.goto(f"{base}/ui/#/schedules")
        row = page.locator("#schedule-nightly-shout")
        expect(row).to_contain_text("cron 0 3 * * * (Europe/Berlin)", timeout=15000)
        expect(row).to_contain_text("none yet")
        page.once("dialog", lambda d: d.accept())
        row.get_by_role("button", name="Fire now").click()
        expect(row.locator("a[href^='#/flow/nightly-shout-']")).to_have_count(1, timeout=15000)
        row.locator("summary").click()
        expect(row.locator("details table")).to_contain_text("started", timeout=15000)

        # The Overview counts active flows as the Flows page does: one
        # waiting for its retry (in no process's memory) too.
        api.start("retry-later", "greet", {"name": ["later"]})
        page.goto(f"{base}/ui/#/overview")
        expect(page.locator(".tile").first).to_contain_text("1active flows", timeout=15000)
        page.goto(f"{base}/ui/#/flows?status=active")
        expect(page.locator("table.list")).to_contain_text("retry-later", timeout=15000)

        # A lane: its limits in words, paused from the page for a while
        # (the API agrees), then resumed.
        status, made = api.call("POST", "/engine/step", {
            "id": "charge", "name": "Charge", "type": "sync",
            "http": {"endpoint": f"{steps_url}/ok"},
            "attributes": {"order": {"role": "required"}, "receipt": {"role": "output"}},
            "limits": {"concurrency": 4, "rate": "10/s", "burst": 5,
                       "breaker": {"failures": 5, "cool_down": "30s"}}})
        assert status == 201, (status, made)
        page.goto(f"{base}/ui/#/lanes")
        lane = page.locator("[id='lane-step:charge']")
        expect(lane).to_contain_text("concurrency 4, rate 10/s (burst 5), breaker after 5 failures, 30 s cool-down",
                                     timeout=15000)
        expect(lane).to_contain_text("breaker closed")
        page.once("dialog", lambda d: d.accept("10m"))
        lane.get_by_role("button", name="Pause").click()
        expect(lane).to_contain_text("resumes in", timeout=15000)
        status, lanes = api.call("GET", "/engine/lanes")
        shown = [x for x in lanes["lanes"] if x["id"] == "step:charge"]
        assert shown and shown[0]["paused"] and shown[0]["paused_until"], lanes
        # Durations are rounded whole before they are split.
        shown_ms = page.evaluate("import('/ui/format.js').then((f) => [599700, 59999, 999.6, 5400000].map(f.ms))")
        assert shown_ms == ["10 min", "1 min", "1 s", "1 h 30 min"], shown_ms
        check_axe(page, "lanes")
        shot(page, "lanes")
        page.once("dialog", lambda d: d.accept())
        lane.get_by_role("button", name="Resume").click()
        expect(lane.get_by_role("button", name="Pause")).to_have_count(1, timeout=15000)
        status, lanes = api.call("GET", "/engine/lanes")
        assert not [x for x in lanes["lanes"] if x["id"] == "step:charge"][0]["paused"], lanes

        # Engines: this one, answering, holding the call of a flow whose
        # step takes 30 s; none once it is cancelled.
        api.start("held-1", "wait", {"name": ["di"]})
        page.goto(f"{base}/ui/#/engines")
        engine_row = page.locator("tr[id^='engine-']")
        expect(engine_row).to_have_count(1, timeout=15000)
        expect(engine_row).to_contain_text("(answering)")
        expect(engine_row.locator("td.num")).to_have_text("1", timeout=15000)
        expect(page.locator("main")).to_contain_text("No step is unhealthy.")
        expect(page.locator("main")).to_contain_text("Steps: 7 unknown")
        check_axe(page, "engines")
        shot(page, "engines")
        api.call("POST", "/engine/flow/held-1/cancel", {})
        expect(engine_row.locator("td.num")).to_have_text("0", timeout=15000)

        # Every page: no serious or critical accessibility violation.
        for where, name, ready in [
            ("#/overview", "overview", ".tile"),
            ("#/flows", "flows", "table.list tbody tr"),
            ("#/steps", "steps", "section.step"),
            ("#/schedules", "schedules", "table.list tbody tr"),
            ("#/bulk", "bulk", "table.list tbody tr"),
        ]:
            page.goto(f"{base}/ui/{where}")
            page.locator(ready).first.wait_for(timeout=15000)
            check_axe(page, name)
            shot(page, name)
        page.goto(f"{base}/ui/#/flows")
        expect(page.locator("table.list")).to_contain_text("retried", timeout=15000)
        # The failed-step filter, through the form.
        page.get_by_label("Failed step").fill("xss")
        page.get_by_role("button", name="Filter", exact=True).click()
        expect(page.locator("table.list tbody tr")).to_have_count(1, timeout=15000)
        expect(page.locator("table.list tbody")).to_contain_text("xss-flow")
        assert "step=xss" in page.url, page.url

        # A phone's width: the flow page still lays out.
        phone = browser.new_page(viewport={"width": 390, "height": 844})
        sign_in(phone, base, FULL, "#/flow/retried")
        expect(phone.locator("h1 + .badge").first).to_have_text("completed", timeout=15000)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"the flow page is {width} px wide on a 390 px screen"
        shot(phone, "flow-phone")

        # A read token: the pages, without the actions.
        reader = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(reader, base, READ, "#/flow/to-cancel")
        expect(reader.locator(".access")).to_have_text("read only", timeout=15000)
        expect(reader.get_by_role("button", name="Retry flow")).to_be_disabled()
        expect(reader.get_by_role("button", name="Cancel flow")).to_be_disabled()
        reader.goto(f"{base}/ui/#/flows")
        expect(reader.get_by_role("button", name="Retry matching…")).to_be_disabled()

        assert not errors, f"errors in the page: {errors}"
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1])
