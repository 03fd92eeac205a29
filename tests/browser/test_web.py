#!/usr/bin/env python3
"""End-to-end test of svc's web UI in a real headless Chromium (Debian's chromium and
chromedriver, driven by Selenium). Launches the real svc binary with the web UI on.

    python3 tests/browser/test_web.py --bin target/debug/svc --out target/web-screenshots
    python3 tests/browser/test_web.py --bin target/release/svc --bench   # speed figures

Exits non-zero with a message on the first failed check.
"""
import argparse
import hashlib
import hmac
import http.server
import threading
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = os.environ.get("SVC_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SVC_CHROMEDRIVER", "/usr/bin/chromedriver")

GATE = """digraph ship {
  goal="Build and ship with a human check"
  start [shape=Mdiamond]
  build [shape=parallelogram, script="echo building; sleep 2"]
  review [shape=hexagon, label="Ship the build?"]
  exit [shape=Msquare]
  start -> build -> review
  review -> exit [label="[Y] Yes"]
  review -> build [label="[N] No"]
}
"""

BROKEN = """digraph broken {
  start [shape=Mdiamond]
  a [shape=parallelogram script="true"
  exit [shape=Msquare]
}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The real svc binary with the web UI enabled, on a loopback port."""

    def __init__(self, binary, settings_extra=""):
        self.dir = tempfile.mkdtemp(prefix="svc-web-")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        with open(os.path.join(self.dir, "settings.toml"), "w") as f:
            f.write(f'[server.web]\nenabled = true\nurl = "{self.base}"\n{settings_extra}')
        self.env = dict(os.environ, SESSION_SECRET=secrets.token_hex(32), RUST_LOG="warn,tiny_http=off")
        self.binary = binary
        self.log = open(os.path.join(self.dir, "server.log"), "a")
        self.launch()
        with open(os.path.join(self.dir, "dev-token")) as f:
            self.token = f.read().strip()

    def launch(self):
        binary, env = self.binary, self.env
        self.proc = subprocess.Popen(
            [binary, "server", "start", "--dev", "--state-dir", self.dir,
             "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=self.log, env=env, text=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("svc: listening on"):
                break
        else:
            raise SystemExit("svc did not start")

    def restart(self):
        """Stops the process and starts it again on the same port, state and secret."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.launch()

    def api(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, method=method, data=data, headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=90) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def create(self, dot, start=True, name="flow.dot"):
        st, run = self.api("POST", "/api/v1/runs", {"workflow": {"entrypoint": name, "files": {name: dot}}})
        check(st == 201, f"create: {st} {run}")
        if start:
            st, _ = self.api("POST", f"/api/v1/runs/{run['id']}/start", {})
            check(st == 200, f"start: {st}")
        return run["id"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def browser(bidi=False):
    """Headless Chromium; `bidi` also opens WebDriver BiDi (user contexts, blocking navigation)."""
    opts = Options()
    opts.enable_bidi = bidi
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="svc-chromium-")
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1000"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_page_load_timeout(90)
    d._svc_profile = profile
    return d


def wait(d, what, f, secs=20):
    try:
        # A node the page re-rendered between finding and reading it is simply tried again.
        return WebDriverWait(d, secs, poll_frequency=0.05,
                             ignored_exceptions=[StaleElementReferenceException]).until(lambda _: f())
    except Exception as e:
        shot(d, "failure")
        raise AssertionError(f"timed out waiting for {what} on {d.current_url}; console: {console(d)}") from e


def console(d):
    try:
        return [m["message"] for m in d.get_log("browser")][-10:]
    except Exception:
        return []


SHOTS = None


def shot(d, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        d.save_screenshot(os.path.join(SHOTS, name + ".png"))


def q(d, css):
    return d.find_elements(By.CSS_SELECTOR, css)


def text(d, css):
    """The text of the first element `css` finds ("" when none), found again when the page
    re-rendered it between finding and reading (a live page re-renders on every event)."""
    for _ in range(100):
        try:
            els = q(d, css)
            return els[0].text if els else ""
        except StaleElementReferenceException:
            time.sleep(0.05)
    raise AssertionError(f"{css} kept being re-rendered for 5 s")


def texts(d, css):
    for _ in range(100):
        try:
            return [e.text for e in q(d, css)]
        except StaleElementReferenceException:
            time.sleep(0.05)
    raise AssertionError(f"{css} kept being re-rendered for 5 s")


def controls(d):
    return d.execute_script("return [...document.querySelectorAll('#controls button')].map(b => b.dataset.action).sort()")


def wait_controls(d, want):
    wait(d, f"controls {want} (have {controls(d)})", lambda: controls(d) == want)


def no_csp_violations(d):
    bad = [m for m in console(d) if "Content Security Policy" in m or "Refused to" in m]
    check(not bad, f"CSP violations: {bad}")


# ---------------------------------------------------------------- checks

def test_demo(d, s):
    d.get(s.base + "/login")
    wait(d, "the demo button", lambda: q(d, "#demo-enter"))
    q(d, "#demo-enter")[0].click()
    wait(d, "demo cards on the board", lambda: len(q(d, ".card")) >= 7)
    check(q(d, "#demo-badge")[0].is_displayed(), "demo badge shown")
    cols = {c.get_attribute("data-column"): len(c.find_elements(By.CSS_SELECTOR, ".card"))
            for c in q(d, ".column")}
    check(cols["running"] == 2 and cols["blocked"] == 1 and cols["queued"] == 1, f"columns {cols}")
    blocked = q(d, '.column[data-column="blocked"] .card')[0]
    check("Apply the migration" in blocked.text, "blocked card shows its question")
    # A blocked run: its question as buttons, cancel and pause allowed, no archive/delete/start.
    d.get(s.base + "/runs/01JNDEM0000000000000000004")
    wait(d, "demo graph", lambda: len(q(d, "#graph g.node")) == 6)
    wait(d, "demo question", lambda: q(d, '#questions form button.option'))
    check(not q(d, "#questions")[0].get_attribute("hidden"), "question panel visible")
    wait_controls(d, ["cancel", "pause"])
    # A finished run: archive and delete only.
    d.get(s.base + "/runs/01JNDEM0000000000000000006")
    wait(d, "succeeded badge", lambda: "succeeded" in q(d, "#run-status")[0].text if q(d, "#run-status") else False)
    wait_controls(d, ["archive", "delete"])
    wait(d, "demo diffs", lambda: q(d, "#files .file-diff"))
    wait(d, "demo usage", lambda: q(d, "#usage table"))
    no_csp_violations(d)
    q(d, "#demo-leave")[0].click()
    wait(d, "sign-in page after leaving demo", lambda: "/login" in d.current_url)
    check("svc-demo=1" not in d.execute_script("return document.cookie"), "demo cookie cleared")


def sign_out(d, s):
    d.get(s.base + "/logout")
    wait(d, "the sign-out button", lambda: q(d, "#signout-submit"))
    q(d, "#signout-submit")[0].click()
    wait(d, "signed out", lambda: "signed out" in q(d, "main")[0].text)
    d.get(s.base + "/")
    wait(d, "sign-in again after sign-out", lambda: "/login" in d.current_url)


def sign_in(d, s):
    d.get(s.base + "/")
    wait(d, "redirect to sign-in", lambda: "/login" in d.current_url and q(d, "#dev-token"))
    q(d, "#dev-token")[0].send_keys("svc_dev_wrong")
    q(d, "#signin-submit")[0].click()
    wait(d, "a refused sign-in in words", lambda: q(d, "#signin-msg .error"))
    box = q(d, "#dev-token")[0]
    box.clear()
    box.send_keys(s.token)
    q(d, "#signin-submit")[0].click()
    wait(d, "the board after sign-in", lambda: q(d, "#board") and d.current_url.rstrip("/") == s.base)


def test_validation_inline(d, s):
    before = s.api("GET", "/api/v1/runs?page[limit]=100")[1]["data"]
    d.get(s.base + "/runs/new")
    wait(d, "the new-run form", lambda: q(d, "#wf-source"))
    d.execute_script("document.getElementById('wf-source').value = arguments[0]", BROKEN)
    q(d, "#create")[0].click()
    wait(d, "inline diagnostics", lambda: q(d, "#diagnostics li"))
    first = q(d, "#diagnostics li")[0]
    check(first.get_attribute("data-line") not in ("", None), "diagnostic names a line")
    check("Line" in first.text and "column" in first.text, f"line and column in words: {first.text}")
    check(q(d, "#wf-source")[0].get_attribute("aria-invalid") == "true", "editor marked invalid")
    shot(d, "new-run-validation")
    # A form mistake is refused in the page, in words.
    d.execute_script("document.getElementById('wf-source').value = arguments[0]", GATE)
    q(d, "#branch")[0].send_keys("main")
    q(d, "#create")[0].click()
    wait(d, "a form error in words", lambda: "A branch needs a repository" in q(d, "#form-msg")[0].text)
    after = s.api("GET", "/api/v1/runs?page[limit]=100")[1]["data"]
    check(len(after) == len(before), "nothing was created")


def test_live_run(d, s):
    # The board stays open in its own window; the run is created in another.
    d.get(s.base + "/")
    wait(d, "board live", lambda: q(d, ".live.ok"))
    d.execute_script("window.__noReload = 1")
    board = d.current_window_handle
    d.switch_to.new_window("tab")
    d.get(s.base + "/runs/new")
    wait(d, "the new-run form", lambda: q(d, "#wf-source"))
    d.execute_script("document.getElementById('wf-source').value = arguments[0]", GATE)
    q(d, "#goal")[0].send_keys("Ship the web UI")
    q(d, "#create")[0].click()
    wait(d, "the run page", lambda: "/runs/01" in d.current_url and q(d, "#graph g.node"))
    run_id = d.current_url.rstrip("/").split("/")[-1]
    wait(d, "build node running live", lambda: "s-running" in (q(d, 'g.node[data-node="build"]')[0].get_attribute("class") or ""))
    wait(d, "the event log streaming", lambda: any("stage.started" in t for t in texts(d, "#events .kind")))
    wait_controls(d, ["cancel", "pause"])
    wait(d, "the question as buttons", lambda: q(d, '#questions button.option'), secs=30)
    wait(d, "blocked badge", lambda: "blocked" in q(d, "#run-status")[0].text)
    shot(d, "run-page-question")
    # Stage details of the finished build stage, chosen with the keyboard.
    node = q(d, 'g.node[data-node="build"]')[0]
    d.execute_script("arguments[0].focus()", node)
    node.send_keys(Keys.ENTER)
    wait(d, "stage details", lambda: "building" in q(d, "#details")[0].text)
    check("echo building" in text(d, "#details"), "the script is shown")
    # Pause: answers are refused in words; unpause and answer.
    q(d, '#controls button[data-action="pause"]')[0].click()
    wait_controls(d, ["cancel", "unpause"])

    def yes():
        b = [b for b in q(d, '#questions button.option') if "Yes" in b.text]
        check(b, "a Yes option")
        return b[0]
    wait(d, "options enabled", lambda: yes().is_enabled())
    yes().click()
    wait(d, "a refusal in words", lambda: q(d, "#questions .error"))
    refusal = text(d, "#questions .error")
    check("paused" in refusal and "{" not in refusal, f"refusal: {refusal}")
    q(d, '#controls button[data-action="unpause"]')[0].click()
    wait_controls(d, ["cancel", "pause"])
    wait(d, "options enabled again", lambda: yes().is_enabled())
    yes().click()
    wait(d, "the run to succeed", lambda: "succeeded" in q(d, "#run-status")[0].text, secs=30)
    wait(d, "exit node succeeded", lambda: "s-succeeded" in (q(d, 'g.node[data-node="exit"]')[0].get_attribute("class") or ""))
    # The path the run took is marked; the edge it did not take is not.
    wait(d, "the taken edges marked", lambda: q(d, 'g.edge.taken[data-from="review"][data-to="exit"]'))
    taken = d.execute_script("return [...document.querySelectorAll('g.edge.taken')].map(g => g.dataset.from + '>' + g.dataset.to).sort()")
    check(taken == ["build>review", "review>exit", "start>build"], f"taken edges: {taken}")
    check(q(d, "#questions")[0].get_attribute("hidden") is not None, "question gone")
    wait_controls(d, ["archive", "delete"])
    check("not available" in text(d, "#files") or q(d, "#files .file-diff") or "not changed" in text(d, "#files"),
          "diffs or an unavailable message in words")
    no_csp_violations(d)
    shot(d, "run-page")
    d.close()
    d.switch_to.window(board)
    wait(d, "the card in Succeeded without reload", lambda: q(d, f'.column[data-column="succeeded"] .card[data-id="{run_id}"]'))
    check(d.execute_script("return window.__noReload") == 1, "the board did not reload")
    shot(d, "board")
    # Readable at phone width: nothing wider than the screen.
    d.set_window_size(390, 844)
    for path in ["/", f"/runs/{run_id}", "/runs/new"]:
        d.get(s.base + path)
        wait(d, f"{path} at phone width", lambda: q(d, "#board, #graph svg, #wf-source"))
        over = d.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        check(over <= 1, f"{path} overflows a phone screen by {over}px")
        shot(d, "phone-" + {"/": "board", "/runs/new": "new-run"}.get(path, "run-page"))
    d.set_window_size(1400, 1000)
    return run_id


def test_automations(d, s):
    """Create an automation in the form (its mistakes shown beside their fields), fire it,
    follow the run; the run page and the board say where the run came from; a run page
    makes a new automation's form."""
    st, v = s.api("POST", "/api/v1/workflow-versions", {"entrypoint": "tiny.dot", "files": {
        "tiny.dot": 'digraph tiny { goal="Tidy up"; start [shape=Mdiamond]; work [shape=parallelogram, script="echo tidy"]; exit [shape=Msquare]; start -> work -> exit }'}})
    check(st in (200, 201), f"version: {st}")
    d.get(s.base + "/automations")
    wait(d, "the automations page", lambda: q(d, "#new-automation"))
    q(d, "#new-automation")[0].click()
    wait(d, "the form", lambda: q(d, "#a-name"))
    q(d, "#a-id")[0].send_keys("Bad Id")
    q(d, "#a-name")[0].send_keys("Nightly tidy")
    q(d, "#a-version")[0].send_keys(v["id"])
    q(d, "#add-trigger")[0].click()
    wait(d, "a second trigger row", lambda: q(d, "#t1-id"))
    q(d, "#t1-id")[0].send_keys("nightly")
    q(d, "#t1-expression")[0].send_keys("0 0 2 * * 2")
    q(d, "#t1-timezone")[0].send_keys("Mars/Base")
    q(d, "#save")[0].click()
    wait(d, "errors beside their fields", lambda: len(q(d, ".field-error")) >= 3)
    errs = {e.get_attribute("data-for"): e.text for e in q(d, ".field-error")}
    check("id" in errs and "triggers[1].expression" in errs and "triggers[1].timezone" in errs, f"errors: {errs}")
    check(q(d, "#t1-expression")[0].get_attribute("aria-invalid") == "true", "the cron field is marked")
    check("five" in errs["triggers[1].expression"], f"says why: {errs}")
    shot(d, "automation-form-errors")
    check(s.api("GET", "/api/v1/automations")[1]["meta"]["total"] == 0, "nothing was created")
    for css, value in [("#a-id", "nightly-tidy"), ("#t1-expression", "0 2 * * 2"), ("#t1-timezone", "Europe/Berlin")]:
        q(d, css)[0].clear()
        q(d, css)[0].send_keys(value)
    q(d, "#save")[0].click()
    wait(d, "the automation's page", lambda: d.current_url.endswith("/automations/nightly-tidy") and q(d, "#fire-now"))
    wait(d, "its next due time", lambda: "next due" in q(d, "#fires-box")[0].text)
    q(d, "#fire-now")[0].click()
    wait(d, "the fired run's link", lambda: q(d, "#fired-run"))
    wait(d, "the fire on record", lambda: q(d, "#fires a.fire-run"))
    shot(d, "automation-page")
    q(d, "#fired-run")[0].click()
    wait(d, "the run page", lambda: "/runs/01" in d.current_url and q(d, "#run-automation"))
    run_id = d.current_url.rstrip("/").split("/")[-1]
    wait(d, "the run naming its automation", lambda: "Nightly tidy" in q(d, "#run-automation")[0].text)
    wait(d, "the run to succeed", lambda: "succeeded" in q(d, "#run-status")[0].text, secs=30)
    no_csp_violations(d)
    # The board card says so too.
    d.get(s.base + "/")
    wait(d, "the card with its automation", lambda: q(d, f'.card[data-id="{run_id}"] a.auto'))
    # Make an automation from this run: the form comes filled in.
    d.get(s.base + f"/runs/{run_id}")
    wait(d, "the make-an-automation link", lambda: q(d, "#make-automation"))
    q(d, "#make-automation")[0].click()
    wait(d, "the prefilled form", lambda: q(d, "#a-version") and q(d, "#a-version")[0].get_attribute("value") == v["id"])
    check(q(d, "#a-goal")[0].get_attribute("value") == "Tidy up", "the goal came along")
    no_csp_violations(d)


def test_board_pages_and_archive(d, s):
    """Archived runs hide unless asked for; more than 100 runs page."""
    dot = "digraph tiny { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }"
    # Created before the board is open, so no live stream is held meanwhile.
    d.get("about:blank")
    for _ in range(101):
        s.create(dot, start=False)
    done = s.create(dot)
    deadline = time.time() + 30
    while s.api("GET", f"/api/v1/runs/{done}")[1]["lifecycle"]["status"]["kind"] != "succeeded":
        check(time.time() < deadline, "the tiny run to succeed")
        time.sleep(0.1)
    finished = [done]
    st, _ = s.api("POST", f"/api/v1/runs/{finished[0]}/archive")
    check(st == 200, f"archive: {st}")
    d.get(s.base + "/")
    wait(d, "board", lambda: q(d, ".live.ok"))
    check(not q(d, f'.card[data-id="{finished[0]}"]'), "archived run hidden")
    q(d, "#show-archived")[0].click()
    wait(d, "archived run shown", lambda: q(d, f'.card[data-id="{finished[0]}"]'))
    d.get(s.base + "/")
    wait(d, "a full first page", lambda: len(q(d, ".card")) == 100)
    q(d, 'a[rel="next"]')[0].click()
    wait(d, "the second page", lambda: "offset=100" in d.current_url and q(d, ".card") and q(d, 'a[rel="prev"]'))


FREEFORM = """digraph note {
  start [shape=Mdiamond]
  ask [shape=hexagon, label="What should the release notes say?"]
  exit [shape=Msquare]
  start -> ask
  ask -> exit [freeform=true]
}
"""


def test_freeform_answer(d, s):
    """A freeform question is a text box; the answer is sent in place."""
    run_id = s.create(FREEFORM)
    d.get(s.base + "/runs/" + run_id)
    wait(d, "the text box", lambda: q(d, '#questions textarea[name="answer"]'), secs=30)
    check(not q(d, "#questions button.option"), "no option buttons on a freeform question")
    q(d, '#questions button[type="submit"]')[0].click()
    wait(d, "an empty answer refused in words", lambda: "Write an answer first" in q(d, "#questions")[0].text)
    q(d, '#questions textarea[name="answer"]')[0].send_keys("Faster boards.")
    q(d, '#questions button[type="submit"]')[0].click()
    wait(d, "the run to succeed", lambda: "succeeded" in q(d, "#run-status")[0].text, secs=30)
    node = q(d, 'g.node[data-node="ask"]')[0]
    node.click()
    wait(d, "the answer in the stage details", lambda: "Faster boards." in q(d, "#details")[0].text)


def test_reconnect(d, s):
    """A dropped stream resumes with Last-Event-ID: no event twice, none missing."""
    run_id = s.create(GATE)
    d.get(s.base + "/runs/" + run_id)
    wait(d, "the question", lambda: q(d, '#questions button.option'), secs=30)
    # The stream drops; the restarted server resumes the interrupted run (crash recovery),
    # which asks its question again.
    s.restart()
    wait(d, "run.interrupted in the log after reconnecting",
         lambda: "run.interrupted" in texts(d, "#events .kind"), secs=40)
    wait(d, "the question asked again", lambda: q(d, '#questions button.option'), secs=40)
    q(d, '#questions button.option')[0].click()
    wait(d, "the run's end", lambda: "succeeded" in q(d, "#run-status")[0].text, secs=40)
    wait(d, "run.completed in the log", lambda: "run.completed" in texts(d, "#events .kind"))
    seqs = d.execute_script("return [...document.querySelectorAll('#events li')].map(li => +li.dataset.seq)")
    check(seqs == list(range(1, len(seqs) + 1)), f"each event once, in order: {seqs}")
    frames = d.execute_script("return window.__svcFrames")
    check(frames == len(seqs), f"the server resumed after the last id: {frames} frames for {len(seqs)} events")
    wait_controls(d, ["archive", "delete"])


class ScriptedLlm:
    """A local Chat Completions endpoint (the openai_compatible wire format, streamed or not)
    answering a scripted list of turns and recording every request body."""

    def __init__(self, turns):
        self.turns = turns
        self.requests = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append(body)
                i = len(outer.requests) - 1
                if i >= len(outer.turns):
                    self.send_response(500)
                    self.end_headers()
                    return
                text, calls = outer.turns[i]
                usage = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}
                finish = "tool_calls" if calls else "stop"
                if not body.get("stream"):
                    msg = {"role": "assistant", "content": text or None}
                    if calls:
                        msg["tool_calls"] = [{"id": c, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                                             for c, n, a in calls]
                    out = json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "local-model",
                                      "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return

                def chunk(delta, fin=None, choices=True):
                    c = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "local-model",
                         "choices": [{"index": 0, "delta": delta, "finish_reason": fin}] if choices else []}
                    return c
                frames = [chunk({"role": "assistant", "content": ""})]
                if text:
                    frames.append(chunk({"content": text}))
                for k, (c, n, a) in enumerate(calls):
                    frames.append(chunk({"tool_calls": [{"index": k, "id": c, "type": "function",
                                                          "function": {"name": n, "arguments": json.dumps(a)}}]}))
                frames.append(chunk({}, finish))
                last = chunk({}, choices=False)
                last["usage"] = usage
                frames.append(last)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for f in frames:
                    self.wfile.write(b"data: " + json.dumps(f).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()


AGENT = """digraph steer {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  work [shape=box, label="Fix the test", prompt="Fix the failing test", model="local-model", provider="openai_compatible"]
  start -> work -> exit
}
"""


def test_steering(d, binary):
    """The steering box appears while the agent runs and its guidance reaches the model."""
    wait_flag = ("i=0; while [ ! -f go.flag ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo released")
    llm = ScriptedLlm([("", [("t1", "shell", {"command": wait_flag, "timeout_ms": 120000})]), ("Fixed, as guided.", [])])
    s = Server(binary, f'[llm.providers.openai_compatible]\nbase_url = "{llm.base}/v1"\n')
    try:
        subprocess.run([binary, "secrets", "set", "OPENAI_COMPATIBLE_API_KEY", "test-key-0123456789abcdef",
                        "--state-dir", s.dir], check=True, capture_output=True)
        d.get(s.base + "/login")
        sign_in_only(d, s)
        run_id = s.create(AGENT)
        d.get(s.base + "/runs/" + run_id)
        wait(d, "the steering box", lambda: q(d, "#steer") and q(d, "#steer")[0].is_displayed(), secs=30)
        wait(d, "the agent's tool call", lambda: len(llm.requests) >= 1)
        q(d, "#steer-text")[0].send_keys("Keep the public API unchanged.")
        q(d, "#steer button[type=submit]")[0].click()
        wait(d, "guidance accepted", lambda: "Guidance sent" in q(d, "#steer")[0].text)
        open(os.path.join(s.dir, "workspaces", run_id, "go.flag"), "w").close()
        wait(d, "the agent run to succeed", lambda: "succeeded" in q(d, "#run-status")[0].text, secs=60)
        wait(d, "the steering box to go", lambda: not q(d, "#steer")[0].is_displayed())
        check(len(llm.requests) == 2 and "Keep the public API unchanged." in json.dumps(llm.requests[1]),
              "the guidance reached the next model call")
        wait(d, "usage per stage and model", lambda: "local-model" in q(d, "#usage")[0].text)
        shot(d, "run-page-agent")
    finally:
        s.stop()
        llm.stop()


def test_mcp_details(d, binary):
    """The run page's stage details list each MCP server of an agent stage: a ready one with
    the tools it offered and the one the agent used, a failed one with its error and the end
    of its stderr."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mcp", "stdio_server.py")
    llm = ScriptedLlm([("", [("c1", "mcp__scripted__echo", {"text": "hi"})]), ("Echoed.", [])])
    s = Server(binary, f'[llm.providers.openai_compatible]\nbase_url = "{llm.base}/v1"\n')
    try:
        subprocess.run([binary, "secrets", "set", "OPENAI_COMPATIBLE_API_KEY", "test-key-0123456789abcdef",
                        "--state-dir", s.dir], check=True, capture_output=True)
        d.get(s.base + "/login")
        sign_in_only(d, s)
        st, run = s.api("POST", "/api/v1/runs", {
            "workflow": {"entrypoint": "flow.dot", "files": {"flow.dot": AGENT}},
            "mcp_servers": [
                {"id": "scripted", "transport": {"type": "stdio", "command": ["python3", script, "ok"]}},
                {"id": "broken", "transport": {"type": "stdio", "command": ["python3", script, "exit"]}}]})
        check(st == 201, f"create: {st} {run}")
        run_id = run["id"]
        st, _ = s.api("POST", f"/api/v1/runs/{run_id}/start", {})
        check(st == 200, f"start: {st}")
        d.get(s.base + "/runs/" + run_id)
        wait(d, "the agent run to succeed", lambda: "succeeded" in q(d, "#run-status")[0].text, secs=60)
        node = q(d, 'g.node[data-node="work"]')[0]
        d.execute_script("arguments[0].focus()", node)
        node.send_keys(Keys.ENTER)
        wait(d, "the MCP servers in the stage details", lambda: q(d, "#details .mcp li"))
        items = texts(d, "#details .mcp li")
        check(len(items) == 2, f"one line per server: {items}")
        check(items[0].startswith("scripted: ready") and "3 tools offered" in items[0] and "used echo" in items[0],
              f"the ready server, its tools and the one used: {items[0]!r}")
        check(items[1].startswith("broken: failed") and "exited" in items[1]
              and "cannot open the database" in items[1], f"the failed server, its error and stderr: {items[1]!r}")
        check("error" in (q(d, "#details .mcp li")[1].get_attribute("class") or ""), "the failed server stands out")
        shot(d, "run-page-mcp")
    finally:
        s.stop()
        llm.stop()


ASK_FLOW = """digraph notes {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  a [shape=parallelogram, script="echo plan-42 > notes.txt"]
  b [shape=parallelogram, script="echo b-ran >> log.txt"]
  start -> a -> b -> exit
}
"""


def test_ask_and_rewind(d, binary):
    """The Ask panel says why it is unavailable, then answers a question about the run from
    its files; "Rewind to here" makes a new run from that stage and supersedes the old one."""
    llm = ScriptedLlm([("", [("c1", "read_file", {"file_path": "notes.txt"})]), ("The notes say plan-42.", [])])
    s = Server(binary, f'[llm.providers.openai_compatible]\nbase_url = "{llm.base}/v1"\n'
               '[run.model]\nprovider = "openai_compatible"\nname = "local-model"\n')
    try:
        d.get(s.base + "/login")
        sign_in_only(d, s)
        run_id = s.create(ASK_FLOW)
        deadline = time.time() + 60
        while s.api("GET", f"/api/v1/runs/{run_id}")[1]["lifecycle"]["status"]["kind"] != "succeeded":
            check(time.time() < deadline, "the run to succeed")
            time.sleep(0.1)
        d.get(s.base + "/runs/" + run_id)
        wait(d, "the Ask panel saying why it is off",
             lambda: q(d, "#ask-unavailable") and "no LLM provider" in q(d, "#ask-unavailable")[0].text)
        check(not q(d, "#ask-text")[0].is_enabled(), "the question box is disabled without a provider")
        subprocess.run([binary, "secrets", "set", "OPENAI_COMPATIBLE_API_KEY", "test-key-0123456789abcdef",
                        "--state-dir", s.dir], check=True, capture_output=True)
        d.refresh()
        wait(d, "the question box", lambda: q(d, "#ask-text") and q(d, "#ask-text")[0].is_enabled())
        q(d, "#ask-text")[0].send_keys("What does notes.txt say?")
        q(d, "#ask-send")[0].click()
        wait(d, "the streamed answer", lambda: "The notes say plan-42." in q(d, "#ask-log")[0].text, secs=30)
        check("read_file" in text(d, "#ask-log"), "the tool it used is shown")
        check(len(llm.requests) == 2, f"two model calls, not {len(llm.requests)}")
        shot(d, "run-page-ask")
        q(d, 'g.node[data-node="b"]')[0].click()
        wait(d, "the rewind button", lambda: q(d, "#rewind-here"))
        q(d, "#rewind-here")[0].click()
        d.switch_to.alert.accept()
        wait(d, "the new run's page", lambda: run_id not in d.current_url and "/runs/01" in d.current_url)
        new_id = d.current_url.split("?")[0].rstrip("/").split("/")[-1]
        wait(d, "the new run to succeed", lambda: q(d, "#run-status") and "succeeded" in q(d, "#run-status")[0].text,
             secs=60)
        st, old = s.api("GET", f"/api/v1/runs/{run_id}")
        check(old["superseded_by"] == new_id, f"superseded_by {old['superseded_by']} != {new_id}")
    finally:
        s.stop()
        llm.stop()


TINY = "digraph tiny { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }"


def rect(d, css):
    return d.execute_script(
        "const e = document.querySelector(arguments[0]); if (!e) return null;"
        "const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}", css)


def no_horizontal_overflow(d, what):
    over = d.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    check(over <= 1, f"{what} overflows the window by {over}px")


def test_polish(d, s):
    """The layout details a newcomer noticed, at 1280 px and at phone width: the board's last
    column fully on screen, a card of a run without a repository not saying "unknown", the run
    details keeping each label above its value, the new-run page's errors on screen where the
    button is, and no "Sign out" on the sign-in page."""
    run_id = s.create(TINY)
    deadline = time.time() + 30
    while s.api("GET", f"/api/v1/runs/{run_id}")[1]["lifecycle"]["status"]["kind"] != "succeeded":
        check(time.time() < deadline, "the tiny run to succeed")
        time.sleep(0.1)
    for width, height in [(1280, 900), (390, 844)]:
        d.set_window_size(width, height)
        where = f"at {width} px"
        d.get(s.base + "/")
        wait(d, f"the board {where}", lambda: q(d, f'.card[data-id="{run_id}"]'))
        no_horizontal_overflow(d, f"the board {where}")
        # Every column inside the board and the window: none clipped, nothing to scroll to
        # (a desktop browser's scrollbar takes ~15 px more than headless Chromium's).
        edges = d.execute_script(
            "const b = document.getElementById('board'); const r = b.getBoundingClientRect();"
            "const w = Math.min(document.documentElement.clientWidth, r.right);"
            "return [b.scrollWidth - b.clientWidth, [...document.querySelectorAll('.column')]"
            ".map(c => [c.dataset.column, c.getBoundingClientRect().right, w])]")
        check(edges[0] <= 0, f"the board scrolls sideways by {edges[0]}px {where}")
        for col, right, w in edges[1]:
            check(right <= w + 0.5, f"column {col} ends at {right}px, past the board's {w}px {where}")
        card = text(d, f'.card[data-id="{run_id}"]')
        check("unknown" not in card, f"a run without a repository shows no repository {where}: {card!r}")
        check(not q(d, f'.card[data-id="{run_id}"] .repo'), f"no repository on the card {where}")

        d.get(s.base + "/runs/" + run_id)
        wait(d, f"the run details {where}", lambda: len(q(d, "#facts dd")) >= 6)
        pairs = d.execute_script(
            "return [...document.querySelectorAll('#facts dt')].map(dt => {"
            " const dd = dt.nextElementSibling; const a = dt.getBoundingClientRect(), b = dd.getBoundingClientRect();"
            " return [dt.textContent, a.left, a.bottom, b.left, b.top]; })")
        for label, dt_left, dt_bottom, dd_left, dd_top in pairs:
            check(abs(dd_left - dt_left) <= 1 and -1 <= dd_top - dt_bottom <= 8,
                  f"{label!r}: its value is not right under it {where} (label at {dt_left},{dt_bottom}; value at {dd_left},{dd_top})")
        no_horizontal_overflow(d, f"the run page {where}")

        d.get(s.base + "/runs/new")
        wait(d, f"the new-run form {where}", lambda: q(d, "#wf-source"))
        d.execute_script("document.getElementById('wf-source').value = arguments[0]", BROKEN)
        d.execute_script("window.scrollTo(0, document.body.scrollHeight)")
        d.execute_script("document.getElementById('create').click()")
        wait(d, f"the diagnostics {where}", lambda: q(d, "#diagnostics li"))
        r = rect(d, "#diagnostics li")
        inner = d.execute_script("return window.innerHeight")
        check(r["top"] >= 0 and r["bottom"] <= inner,
              f"the first error is off-screen {where}: {r['top']:.0f}..{r['bottom']:.0f} of {inner}px")
        check("errors" in text(d, "#form-msg"), f"the button's message points at the errors {where}")
        shot(d, f"new-run-errors-{width}")

        d.get(s.base + "/login")
        wait(d, f"the sign-in page {where}", lambda: q(d, "#dev-token"))
        shown = d.execute_script(
            "return [...document.querySelectorAll('a, button')].filter(e => e.offsetParent !== null"
            " && /sign out/i.test(e.textContent)).length")
        check(shown == 0, f"the sign-in page offers Sign out {where}")
    d.set_window_size(1400, 1000)


def test_dev_board(d, binary):
    """`svc server start --dev` with nothing configured: the web UI is on, the board's URL
    and how to sign in are printed, the session secret is made and kept (0600)."""
    state = tempfile.mkdtemp(prefix="svc-dev-")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "SESSION_SECRET"}
    env["RUST_LOG"] = "warn,tiny_http=off"
    proc = subprocess.Popen([binary, "server", "start", "--dev", "--state-dir", state, "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        lines = []
        deadline = time.time() + 20
        while time.time() < deadline and not any(l.startswith("svc: board:") for l in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        board = next((l for l in lines if l.startswith("svc: board:")), None)
        check(board is not None, f"the board line: {lines}")
        url = board.split("open ", 1)[1].split(" ", 1)[0]
        check(url == f"http://127.0.0.1:{port}/", f"the board's URL: {board}")
        check("dev token" in board, f"how to sign in: {board}")
        token = next(l for l in lines if l.startswith("svc: dev token")).rsplit(" ", 1)[1]
        secret = os.path.join(state, "dev-session-secret")
        check(os.stat(secret).st_mode & 0o777 == 0o600, "the session secret is private")
        # Cookies are per host, not per port: the other server's session must not count here.
        d.get(url)
        d.delete_all_cookies()
        d.get(url)
        wait(d, "sign-in first", lambda: "/login" in d.current_url and q(d, "#dev-token"))
        q(d, "#dev-token")[0].send_keys(token)
        q(d, "#signin-submit")[0].click()
        wait(d, "the dev board", lambda: q(d, "#board") and q(d, ".live.ok"))
        no_csp_violations(d)
        shot(d, "dev-board")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(state, ignore_errors=True)


def test_errors_in_words(d, s):
    d.get(s.base + "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV")
    wait(d, "a not-found message", lambda: q(d, "main .error"))
    said = text(d, "main .error")
    check("does not exist" in said and "{" not in said, f"words, not JSON: {said}")


# ---------------------------------------------------------------- benchmark

CHAIN = "digraph chain {{\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n{nodes}\n  start -> {chain} -> exit\n}}\n"


def chain(n, sleep):
    nodes = "\n".join(f'  s{i} [shape=parallelogram, script="sleep {sleep}"]' for i in range(n))
    return CHAIN.format(nodes=nodes, chain=" -> ".join(f"s{i}" for i in range(n)))


def page_weights(s):
    """Bytes of each page with its linked assets, uncompressed, as served."""
    import re
    out = {}
    for path in ["/", "/runs/new", "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV", "/login", "/logout"]:
        req = urllib.request.Request(s.base + path, headers={"Accept": "text/html"})
        html = urllib.request.urlopen(req, timeout=10).read()
        total = len(html)
        for name in re.findall(rb'/assets/([A-Za-z0-9_.-]+)', html):
            total += len(urllib.request.urlopen(s.base + "/assets/" + name.decode(), timeout=10).read())
        out[path] = total
    return out


def bench(d, binary):
    out = {}
    # Board first paint with 1,000 runs.
    s = Server(binary)
    try:
        dot = chain(1, 0)
        for _ in range(1000):
            s.create(dot, start=False)
        d.get(s.base + "/login")
        sign_in_only(d, s)
        paints = []
        for _ in range(5):
            d.get(s.base + "/")
            wait(d, "board painted", lambda: d.execute_script("return window.__svcBoardPainted"))
            paints.append(d.execute_script("return window.__svcBoardPainted"))
        out["board_first_paint_ms_1000_runs"] = {"median": statistics.median(paints), "max": max(paints)}
        out["page_weight_bytes"] = page_weights(s)
    finally:
        s.stop()
    # Stage event commit to DOM change with 50 runs on the board.
    s = Server(binary, "[server.scheduler]\nmax_concurrent_runs = 60\n")
    try:
        d.get(s.base + "/login")
        sign_in_only(d, s)
        ids = [s.create(chain(20, 0.2), start=False) for _ in range(50)]
        d.get(s.base + "/runs/" + ids[0])
        wait(d, "graph", lambda: q(d, "#graph g.node"))
        d.switch_to.new_window("tab")
        d.get(s.base + "/")
        wait(d, "board live", lambda: q(d, ".live.ok"))
        for i in ids:
            s.api("POST", f"/api/v1/runs/{i}/start", {})
        wait(d, "board cards succeed", lambda: len(q(d, '.column[data-column="succeeded"] .card')) == 50, secs=120)
        board = d.execute_script("return svc.probes")
        d.switch_to.window(d.window_handles[0])
        wait(d, "run page finished", lambda: "succeeded" in q(d, "#run-status")[0].text, secs=60)
        run = d.execute_script("return svc.probes")

        def pct(xs, p):
            xs = sorted(xs)
            return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else None
        out["run_page_stage_event_to_dom_ms"] = {"n": len(run), "p50": pct(run, 50), "p99": pct(run, 99), "max": max(run or [0])}
        out["board_run_event_to_dom_ms_50_runs"] = {"n": len(board), "p50": pct(board, 50), "p99": pct(board, 99), "max": max(board or [0])}
    finally:
        s.stop()
    return out


class ScriptedCodeHost:
    """The code host's REST answers a pull request view needs (GitHub's wire format): the
    pull request and its head's check runs and statuses, as the test sets them."""

    def __init__(self):
        self.pr = None
        self.check_runs = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                if path.endswith("/pulls/7") and outer.pr:
                    body = outer.pr
                elif path.endswith("/check-runs"):
                    body = {"total_count": len(outer.check_runs), "check_runs": outer.check_runs}
                elif path.endswith("/status"):
                    body = {"state": "pending", "statuses": []}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                out = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()


WEBHOOK_SECRET = "browser-webhook-secret"


def deliver(s, event, delivery, payload):
    body = json.dumps(payload).encode()
    sig = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(s.base + "/api/v1/webhooks/codehost", method="POST", data=body, headers={
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sig,
        "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        check(r.status == 200, f"webhook {delivery}: {r.status}")


def test_pull_request(d, binary):
    """A run's pull request and its checks on the board and the run page, red then green as
    signed webhooks arrive, without reloading."""
    host = ScriptedCodeHost()
    s = Server(binary, f'[server.integrations.codehost]\nenabled = true\napi_url = "{host.base}/api/v3"\nweb_url = "{host.base}"\n')
    try:
        for name, value in [("CODEHOST_TOKEN", "ghp_browserTestToken0000"), ("CODEHOST_WEBHOOK_SECRET", WEBHOOK_SECRET)]:
            subprocess.run([binary, "secrets", "set", name, value, "--state-dir", s.dir], check=True, capture_output=True)
        d.get(s.base + "/login")
        sign_in_only(d, s)
        run_id = s.create('digraph hello { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }')
        wait(d, "the run to end", lambda: s.api("GET", f"/api/v1/runs/{run_id}")[1]["lifecycle"]["status"]["kind"] == "succeeded")
        repo = {"name": "app", "full_name": "acme/app", "owner": {"login": "acme"}}
        host.pr = {"number": 7, "title": "Fix the greeting", "state": "open", "draft": False, "merged": False,
                   "additions": 12, "deletions": 3, "changed_files": 2, "comments": 1, "review_comments": 1,
                   "user": {"login": "svc-bot"}, "head": {"ref": "svc/run/x", "sha": "abc123"}, "base": {"ref": "main"},
                   "html_url": f"{host.base}/acme/app/pull/7", "created_at": "2026-01-01T00:00:00Z",
                   "updated_at": "2026-01-01T00:00:00Z"}
        st, link = s.api("PUT", f"/api/v1/runs/{run_id}/pull_request", {"html_url": f"{host.base}/acme/app/pull/7"})
        check(st == 200 and link["number"] == 7, f"link: {st} {link}")
        deliver(s, "pull_request", "b1", {"action": "opened", "pull_request": host.pr, "repository": repo})
        d.get(s.base + "/")
        card = f'.card[data-id="{run_id}"]'
        wait(d, "the card's pull request", lambda: q(d, card + ' .card-pr[data-pr="7"]'))
        check("PR #7" in text(d, card), "the card names the pull request")
        red = {"name": "ci", "head_sha": "abc123", "status": "completed", "conclusion": "failure",
               "started_at": "2026-01-01T00:00:00Z", "completed_at": "2026-01-01T00:01:40Z",
               "output": {"title": "2 tests failed", "summary": "test_greeting: expected hello"}, "pull_requests": [{"number": 7}]}
        host.check_runs = [red]
        deliver(s, "check_run", "b2", {"action": "completed", "check_run": red, "repository": repo})
        wait(d, "a red check on the card, live", lambda: q(d, card + ' .chip-bad[data-check="ci"]'))
        shot(d, "board-pull-request")
        d.get(s.base + "/runs/" + run_id)
        wait(d, "the pull request panel", lambda: q(d, "#pull-request") and q(d, "#pull-request")[0].is_displayed()
             and q(d, "#pr-link"))
        panel = q(d, "#pull-request")[0]
        check("acme/app#7" in panel.text and "Fix the greeting" in panel.text, f"panel: {panel.text}")
        wait(d, "the failing check and its output", lambda: q(d, '#pr-checks .chip-bad[data-check="ci"]')
             and "test_greeting: expected hello" in text(d, "#pr-checks"))
        check("+12" in panel.text and "2 comments" in panel.text, f"counts: {panel.text}")
        green = dict(red, conclusion="success", output={"title": "all passed", "summary": "12 tests"})
        host.check_runs = [green]
        deliver(s, "check_run", "b3", {"action": "completed", "check_run": green, "repository": repo})
        wait(d, "the check turning green on the run page, live", lambda: q(d, '#pr-checks .chip-ok[data-check="ci"]'))
        check(text(d, "#pr-verdict") == "passed", "verdict passed")
        shot(d, "run-page-pull-request")
    finally:
        s.stop()
        host.stop()


def sign_in_only(d, s):
    wait(d, "sign-in form", lambda: q(d, "#dev-token"))
    q(d, "#dev-token")[0].send_keys(s.token)
    q(d, "#signin-submit")[0].click()
    wait(d, "signed in", lambda: "/login" not in d.current_url)


def main():
    global SHOTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", default=None, help="directory for screenshots")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    SHOTS = a.out
    d = browser()
    try:
        if a.bench:
            print(json.dumps(bench(d, a.bin), indent=2))
            return
        s = Server(a.bin)
        try:
            steps = [("demo mode", test_demo), ("sign in", sign_in), ("inline validation", test_validation_inline),
                     ("live run with a human gate", test_live_run), ("errors in words", test_errors_in_words),
                     ("freeform answer", test_freeform_answer),
                     ("reconnect with Last-Event-ID", test_reconnect),
                     ("board pages and archive filter", test_board_pages_and_archive),
                     ("layout at 1280 px and phone width", test_polish),
                     ("automations: form, fire, follow the run", test_automations)]
            steps.append(("sign out", sign_out))
            for name, f in steps:
                if a.only and a.only not in name and name != "sign in":
                    continue
                t = time.time()
                f(d, s)
                print(f"ok: {name} ({time.time() - t:.1f}s)", flush=True)
        finally:
            s.stop()
        if not a.only or a.only in "dev mode board":
            t = time.time()
            test_dev_board(d, a.bin)
            print(f"ok: dev mode board ({time.time() - t:.1f}s)", flush=True)
        if not a.only or a.only in "pull request and checks":
            t = time.time()
            test_pull_request(d, a.bin)
            print(f"ok: pull request and checks ({time.time() - t:.1f}s)", flush=True)
        if not a.only or a.only in "steering an agent":
            t = time.time()
            test_steering(d, a.bin)
            print(f"ok: steering an agent ({time.time() - t:.1f}s)", flush=True)
        if not a.only or a.only in "MCP servers in the stage details":
            t = time.time()
            test_mcp_details(d, a.bin)
            print(f"ok: MCP servers in the stage details ({time.time() - t:.1f}s)", flush=True)
        if not a.only or a.only in "ask and rewind":
            t = time.time()
            test_ask_and_rewind(d, a.bin)
            print(f"ok: ask and rewind ({time.time() - t:.1f}s)", flush=True)
    finally:
        d.quit()
        shutil.rmtree(getattr(d, "_svc_profile", ""), ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
