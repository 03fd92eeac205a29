#!/usr/bin/env python3
"""The threat model's browser checks (docs/decisions.md "Threat model") in a real headless
Chromium against the real svc binary:

- a page served by workflow code through a preview tries, as the signed-in user's browser,
  to read /api/v1/user, to POST to the API with the user's cookie, to set cookies on svc's
  origin (from script, for the UI's parent domain, and through Set-Cookie) and to frame the
  UI, all at the UI's own address: each fails and the session is intact (previews on the
  UI's origin, sandboxed; on a listener of their own; on a host of their own, where the
  page keeps an origin; and on a host under the UI's parent domain, sandboxed again);
- the sign-in page's own script never leaves the site for a hostile `next`;
- the install wizard's pages work under their Content-Security-Policy.

    python3 tests/browser/test_security.py --bin target/debug/svc

Exits non-zero with a message on the first failed check.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_web import Server, browser, check, console, free_port, q, wait  # noqa: E402

# The attacker's page: each attempt records what happened in the page's own DOM, where the
# test reads it. `VICTIM` is a run the page tries to archive, `UIBASE` the UI's address (the
# page attacks the UI there, whatever origin the page itself has), `PARENT` the domain a
# tossed cookie is set for.
ATTACK = """<!doctype html><html><body><h1 id=title>preview</h1><pre id=out></pre>
<iframe id=ui src="UIBASE/" width=400 height=300></iframe>
<script>
const results = {};
const done = () => { document.getElementById('out').textContent = JSON.stringify(results); document.body.dataset.done = '1'; };
async function attempt(name, f) {
  try { results[name] = await f(); } catch (e) { results[name] = 'error: ' + e.name; }
}
(async () => {
  await attempt('read_user', async () => {
    const r = await fetch('UIBASE/api/v1/user', {credentials: 'include'});
    return 'status ' + r.status + ': ' + (await r.text()).slice(0, 200);
  });
  await attempt('archive', async () => {
    const r = await fetch('UIBASE/api/v1/runs/VICTIM/archive', {method: 'POST', credentials: 'include',
      headers: {'Content-Type': 'application/json'}, body: '{}'});
    return 'status ' + r.status;
  });
  await attempt('archive_form', async () => {
    const f = document.createElement('form');
    f.method = 'POST'; f.action = 'UIBASE/api/v1/runs/VICTIM/archive'; f.target = 'sink';
    const sink = document.createElement('iframe'); sink.name = 'sink'; document.body.appendChild(sink);
    document.body.appendChild(f); f.submit();
    await new Promise(r => setTimeout(r, 1500));
    return 'submitted';
  });
  await attempt('set_cookie', async () => { document.cookie = 'svc-demo=1; path=/'; return 'set: ' + document.cookie; });
  await attempt('toss_cookie', async () => {
    document.cookie = 'svc-demo=1; path=/; domain=PARENT';
    document.cookie = '__svc_session=planted; path=/; domain=PARENT';
    return 'set: ' + document.cookie;
  });
  await attempt('read_cookie', async () => document.cookie);
  await attempt('storage', async () => { localStorage.setItem('x', '1'); return 'stored'; });
  await attempt('frame_ui', async () => {
    await new Promise(r => setTimeout(r, 1000));
    const f = document.getElementById('ui');
    return 'frame: ' + (f.contentDocument ? f.contentDocument.title : 'no access');
  });
  done();
})();
</script></body></html>
"""

# The sandbox's server: the attack page at /page, and Set-Cookie headers on every answer
# (they would plant a session and demo mode on svc's origin).
SERVE = r"""
import http.server, sys
page = open(sys.argv[2], 'rb').read()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'text/html')
        self.send_header('Set-Cookie', '__svc_session=planted; Path=/; HttpOnly')
        self.send_header('Set-Cookie', 'svc-demo=1; Path=/')
        self.send_header('Content-Length', str(len(page)))
        self.end_headers()
        self.wfile.write(page)
http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
"""


def sign_in(d, s, ui=None):
    d.get((ui or s.base) + "/login")
    wait(d, "the sign-in form", lambda: q(d, "#dev-token"))
    q(d, "#dev-token")[0].send_keys(s.token)
    q(d, "#signin-submit")[0].click()
    wait(d, "the board after sign-in", lambda: q(d, "#board"))


def session_cookie(d, ui):
    d.get(ui + "/assets/app.css")
    return {c["name"]: c["value"] for c in d.get_cookies()}


def user_as_browser(d, ui):
    """GET /api/v1/user from a page of svc's own origin, with the browser's cookie."""
    d.get(ui + "/login")
    return d.execute_async_script("""
        const done = arguments[0];
        fetch('/api/v1/user', {credentials: 'same-origin'}).then(r => r.json().then(b => done([r.status, b])));
    """)


def attack_run(s, workdir, ui=None, parent="127.0.0.1"):
    """A run whose stage serves the attack page (attacking the UI at `ui`, default `s.base`)
    on a free port until cancelled."""
    port = free_port()
    victim = s.create('digraph v { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }')
    page = os.path.join(workdir, f"attack-{port}.html")
    with open(page, "w") as f:
        f.write(ATTACK.replace("VICTIM", victim).replace("UIBASE", ui or s.base).replace("PARENT", parent))
    script = os.path.join(workdir, "serve.py")
    with open(script, "w") as f:
        f.write(SERVE)
    flow = ('digraph a { start [shape=Mdiamond]; exit [shape=Msquare]; '
            f'serve [shape=parallelogram, script="exec python3 {script} {port} {page}"]; '
            'start -> serve -> exit }')
    run = s.create(flow)
    deadline = time.time() + 30
    while time.time() < deadline:
        st, r = s.api("GET", f"/api/v1/runs/{run}")
        if r["sandbox"]["kind"] == "ready":
            break
        time.sleep(0.1)
    st, made = s.api("POST", f"/api/v1/runs/{run}/preview", {"port": port, "expires_in_secs": 600, "signed": True})
    check(st == 201, f"preview: {st} {made}")
    return run, victim, made["url"]


def check_attack(d, s, url, victim, label, ui=None):
    ui = ui or s.base
    before = session_cookie(d, ui)
    check("__svc_session" in before, f"{label}: signed in before the attack")
    deadline = time.time() + 30
    while True:
        d.get(url + "page")
        if q(d, "#title"):
            break
        check(time.time() < deadline, f"{label}: the preview page never loaded")
        time.sleep(0.3)
    wait(d, f"{label}: the attack to finish", lambda: d.execute_script("return document.body.dataset.done") == "1", secs=30)
    results = json.loads(q(d, "#out")[0].text)
    print(f"{label}: {results}")
    # Reading the user: refused by CORS (a network error) or without credentials (401).
    r = results["read_user"]
    check(r.startswith("error") or r.startswith("status 401"), f"{label}: read /api/v1/user: {r}")
    check('"login"' not in r, f"{label}: the user leaked: {r}")
    a = results["archive"]
    check(a.startswith("error") or a.startswith("status 401") or a.startswith("status 403"), f"{label}: archive: {a}")
    # Cookies: svc's cannot be read or written by the page.
    check("__svc_session" not in results["read_cookie"], f"{label}: cookie read: {results['read_cookie']}")
    # Framing the UI: the frame never shows the UI (X-Frame-Options / frame-ancestors).
    d.switch_to.frame(d.find_element("id", "ui"))
    framed = d.page_source
    d.switch_to.default_content()
    check('id="board"' not in framed and "dev-token" not in framed and "Sign in" not in framed,
          f"{label}: the UI rendered in a frame: {framed[:300]}")
    # Afterwards: the same session, no demo cookie, the user still signed in, nothing archived.
    after = session_cookie(d, ui)
    check(after.get("__svc_session") == before["__svc_session"], f"{label}: the session cookie changed: {after}")
    check("svc-demo" not in after, f"{label}: the page planted svc-demo: {after}")
    status, me = user_as_browser(d, ui)
    check(status == 200 and me.get("login") == "dev", f"{label}: the session is gone: {status} {me}")
    st, v = s.api("GET", f"/api/v1/runs/{victim}")
    check(not v["lifecycle"].get("archived"), f"{label}: the victim run was archived: {v['lifecycle']}")
    return results


def test_previews_on_the_ui_origin(d, s, workdir):
    sign_in(d, s)
    run, victim, url = attack_run(s, workdir)
    check(url.startswith(s.base + "/preview/"), f"fallback URL on the UI origin: {url}")
    results = check_attack(d, s, url, victim, "same-origin fallback")
    # Sandboxed without allow-same-origin: the page has no origin, so no storage either.
    check(results["set_cookie"].startswith("error"), f"document.cookie works: {results['set_cookie']}")
    check(results["storage"].startswith("error"), f"localStorage works: {results['storage']}")
    s.api("POST", f"/api/v1/runs/{run}/cancel")


def test_previews_on_their_own_listener(d, binary, workdir):
    port = free_port()
    s = Server(binary, settings_extra=f'[server.preview]\nlisten = "127.0.0.1:{port}"\n')
    try:
        sign_in(d, s)
        run, victim, url = attack_run(s, workdir)
        check(url.startswith(f"http://127.0.0.1:{port}/preview/"), f"URL on the preview listener: {url}")
        check_attack(d, s, url, victim, "own listener")
        s.api("POST", f"/api/v1/runs/{run}/cancel")
    finally:
        s.stop()


def test_previews_on_their_own_host(d, binary, workdir):
    """`[server.preview] url` on a host sharing no cookies with the UI's (Chromium resolves
    `*.localhost` to the loopback): the page keeps an origin of its own (its cookies and
    storage work there) and still cannot act as the user on the UI's address."""
    s = Server(binary)
    try:
        preview = f"http://preview.localhost:{s.port}"
        with open(os.path.join(s.dir, "settings.toml"), "a") as f:
            f.write(f'[server.preview]\nurl = "{preview}"\n')
        s.restart()
        sign_in(d, s)
        run, victim, url = attack_run(s, workdir)
        check(url.startswith(preview + "/preview/"), f"URL on the preview host: {url}")
        results = check_attack(d, s, url, victim, "own host")
        # The page's origin is its own: its storage works, its cookies stay on its host.
        check(results["storage"] == "stored", f"own host: localStorage: {results['storage']}")
        check(results["set_cookie"].startswith("set: ") and "svc-demo=1" in results["set_cookie"],
              f"own host: document.cookie: {results['set_cookie']}")
        s.api("POST", f"/api/v1/runs/{run}/cancel")
    finally:
        s.stop()


def test_previews_on_a_host_under_the_uis_domain(d, binary, workdir):
    """The UI on `svc.example.localhost`, previews on `preview.example.localhost`: a page with
    an origin there could set cookies for `example.localhost` that the UI receives
    (Chromium takes them), so it is sandboxed: its cookie tossing throws and the UI keeps
    its session without demo mode."""
    s = Server(binary)
    try:
        ui = f"http://svc.example.localhost:{s.port}"
        preview = f"http://preview.example.localhost:{s.port}"
        with open(os.path.join(s.dir, "settings.toml"), "w") as f:
            f.write(f'[server.web]\nenabled = true\nurl = "{ui}"\n[server.preview]\nurl = "{preview}"\n')
        s.restart()
        sign_in(d, s, ui)
        run, victim, url = attack_run(s, workdir, ui=ui, parent="example.localhost")
        check(url.startswith(preview + "/preview/"), f"URL on the preview host: {url}")
        results = check_attack(d, s, url, victim, "sibling host", ui=ui)
        check(results["toss_cookie"].startswith("error"), f"sibling host: cookie tossed: {results['toss_cookie']}")
        s.api("POST", f"/api/v1/runs/{run}/cancel")
    finally:
        s.stop()


HOSTILE_NEXT = [
    "/\t/127.0.0.1:38201/x", "/\\127.0.0.1:38201/x", "\\\\127.0.0.1:38201", "//127.0.0.1:38201/x",
    "/%2F127.0.0.1:38201", "%2F%2F127.0.0.1:38201", "/%5C127.0.0.1:38201", "/\n/127.0.0.1:38201",
    "/\r\n/127.0.0.1:38201", "/%0d%0a/127.0.0.1:38201", "http://127.0.0.1:38201/x",
    "https:127.0.0.1:38201", "javascript:alert(1)", "/ /127.0.0.1:38201",
    "/%09/127.0.0.1:38201/x", "/%252F%252F127.0.0.1:38201", "/%255C127.0.0.1:38201",
    "///127.0.0.1:38201", "https://127.0.0.1:38201/x", "\t//127.0.0.1:38201",
]


def test_sign_in_page_keeps_next_on_site(d, s):
    """The page's own script (the JSON sign-in, then location.assign(next))."""
    for nxt in HOSTILE_NEXT:
        d.delete_all_cookies()
        d.get(s.base + "/login?next=" + urllib.parse.quote(nxt, safe=""))
        wait(d, "the sign-in form", lambda: q(d, "#dev-token"))
        q(d, "#dev-token")[0].send_keys(s.token)
        q(d, "#signin-submit")[0].click()
        wait(d, f"navigation after sign-in ({nxt!r})", lambda: "/login" not in d.current_url, secs=15)
        time.sleep(0.2)
        cur = d.current_url
        check(cur.startswith(s.base + "/"), f"next={nxt!r} left the site: {cur}")
        check(urllib.parse.urlparse(cur).path == "/", f"next={nxt!r} went to {cur}, not /")
    # A local path is kept.
    d.delete_all_cookies()
    d.get(s.base + "/login?next=" + urllib.parse.quote("/runs/new"))
    wait(d, "the sign-in form", lambda: q(d, "#dev-token"))
    q(d, "#dev-token")[0].send_keys(s.token)
    q(d, "#signin-submit")[0].click()
    wait(d, "the kept next", lambda: d.current_url == s.base + "/runs/new")


def test_install_pages_work_under_their_csp(d, binary):
    tmp = tempfile.mkdtemp(prefix="svc-install-")
    port = free_port()
    proc = subprocess.Popen([binary, "server", "start", "--state-dir", tmp, "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = None
        deadline = time.time() + 20
        while time.time() < deadline and url is None:
            line = proc.stdout.readline()
            if line.startswith("svc: install URL: "):
                url = line.split(": ", 2)[2].strip()
        check(url, "install URL printed")
        d.get(url)
        wait(d, "the server step", lambda: q(d, "#url"))
        d.execute_script("document.getElementById('url').value = 'https://svc.example.com'")
        q(d, "button")[0].click()
        wait(d, "the step saved", lambda: q(d, "#out") and q(d, "#out")[0].text == "Saved.")
        bad = [m for m in console(d) if "Content Security Policy" in m or "Refused to" in m]
        check(not bad, f"CSP violations on the install page: {bad}")
        # The wizard cannot be framed.
        d.get("about:blank")
        d.execute_script("const f = document.createElement('iframe'); f.id = 'w'; f.src = arguments[0]; document.body.appendChild(f);", url)
        time.sleep(1.5)
        d.switch_to.frame(d.find_element("id", "w"))
        framed = d.page_source
        d.switch_to.default_content()
        check("Install svc" not in framed, "the install page rendered in a frame")
    finally:
        proc.terminate()
        proc.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    d = browser()
    s = Server(a.bin)
    workdir = tempfile.mkdtemp(prefix="svc-attack-")
    try:
        test_previews_on_the_ui_origin(d, s, workdir)
        test_previews_on_their_own_listener(d, a.bin, workdir)
        test_previews_on_their_own_host(d, a.bin, workdir)
        test_previews_on_a_host_under_the_uis_domain(d, a.bin, workdir)
        test_sign_in_page_keeps_next_on_site(d, s)
        test_install_pages_work_under_their_csp(d, a.bin)
        print("browser security checks passed")
    finally:
        s.stop()
        d.quit()


if __name__ == "__main__":
    main()
