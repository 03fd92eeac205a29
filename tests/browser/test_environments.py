#!/usr/bin/env python3
"""The environments page and the new-run form's environment chooser in a real headless
Chromium (issue 30), against the real svc binary: the page is linked from the header and
lists the seeded `default` with what each provider would honour; an environment created
through the form is listed (its variable by name only, never its value); refusals (422)
show beside the fields they name; an edit saves with the revision, and a stale one is
refused with the 409 in words until the current version is loaded; the new-run form lists
the environments with nothing preselected when `[run] environment` is unset (as the API), a run started with the chosen one shows it on
its page and its frozen plan names it (and `[run] environment`, when set, is the one
preselected); a stale delete is refused; deleting the environment leaves the run's plan
alone. Screenshots at 1280 px and phone width (nothing wider than the screen).

    python3 tests/browser/test_environments.py --bin target/debug/svc --out target/web-screenshots
"""
import argparse
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_web  # noqa: E402
from test_web import (Server, browser, check, wait, q, text, texts, sign_in, shot,  # noqa: E402
                      no_csp_violations, no_horizontal_overflow)

SECRET_VALUE = "tok-never-shown-0123456789"
FLOW = """digraph envflow {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  hello [shape=parallelogram, script="echo hello from the environment"]
  start -> hello -> exit
}
"""


def put_if_match(s, path, revision, body):
    """PUT through the API with `If-Match` (another client editing the same environment)."""
    req = urllib.request.Request(s.base + path, method="PUT", data=json.dumps(body).encode(), headers={
        "Authorization": "Bearer " + s.token, "Content-Type": "application/json", "If-Match": f'"{revision}"'})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def card(id_):
    return f'#env-list li[data-id="{id_}"]'


def fact(d, id_, name):
    return text(d, f'{card(id_)} [data-fact="{name}"] dd')


def fill(d, css, value):
    box = q(d, css)[0]
    box.clear()
    box.send_keys(value)


def save(d):
    q(d, "#env-save")[0].click()


def test_list_and_create(d, s):
    d.get(s.base + "/")
    wait(d, "the board", lambda: q(d, "#board"))
    link = [a for a in q(d, "header nav a") if a.get_attribute("href").endswith("/environments")]
    check(link and link[0].text == "Environments", "the header links the environments page")
    link[0].click()
    wait(d, "the environments page", lambda: q(d, card("default")))
    check(fact(d, "default", "provider") == "container", f"default's provider: {fact(d, 'default', 'provider')}")
    check("memory 4GB" in fact(d, "default", "resources"), fact(d, "default", "resources"))
    wait(d, "default's preflight", lambda: q(d, card("default") + ' .preflight li[data-provider="hosted"]'))
    check(q(d, card("default") + ' .preflight li[data-provider="container"]')[0].get_attribute("data-ok") == "true",
          "container honours default")
    hosted = text(d, card("default") + ' .preflight li[data-provider="hosted"]')
    check("refuses provider" in hosted and "not configured" in hosted, f"hosted says why: {hosted}")

    # Refused fields, each beside its input, in words; nothing created.
    fill(d, "#env-id", "blocked-local")
    d.find_element("css selector", '#env-provider option[value="local"]').click()
    d.find_element("css selector", '#env-network option[value="block"]').click()
    fill(d, "#env-memory", "1MB")
    fill(d, "#env-image", "debian:12")
    save(d)
    wait(d, "the refusals beside their fields", lambda: len(q(d, ".field-error")) >= 3)
    by_field = {e.get_attribute("data-for"): e.text for e in q(d, ".field-error")}
    check(set(by_field) >= {"network", "image", "resources.memory"}, f"errors by field: {by_field}")
    check("use provider `container`" in by_field["network"], f"the fix in words: {by_field['network']}")
    check(q(d, "#env-network")[0].get_attribute("aria-invalid") == "true", "the network select is marked")
    check("Not saved" in text(d, "#env-form-msg"), text(d, "#env-form-msg"))
    check(s.api("GET", "/api/v1/environments/blocked-local")[0] == 404, "nothing was created")
    shot(d, "environments-errors")

    # A good one, with a variable: listed, the value never shown back.
    q(d, "#new-env")[0].click()
    check(q(d, "#env-id")[0].get_attribute("value") == "", "the form is empty again")
    fill(d, "#env-id", "web-small")
    fill(d, "#env-description", "Small local sandbox for the web tests")
    d.find_element("css selector", '#env-provider option[value="local"]').click()
    fill(d, "#env-cpu", "1")
    fill(d, "#env-memory", "512MB")
    fill(d, "#env-labels", "team=web")
    q(d, "#add-var")[0].click()
    fill(d, "#env-vars .var-row:last-child .var-key", "API_TOKEN")
    fill(d, "#env-vars .var-row:last-child .var-value", SECRET_VALUE)
    save(d)
    wait(d, "the new environment listed", lambda: q(d, card("web-small")))
    check("Saved web-small" in text(d, "#env-status"), text(d, "#env-status"))
    check(fact(d, "web-small", "provider") == "local", fact(d, "web-small", "provider"))
    check(fact(d, "web-small", "resources") == "cpu 1 · memory 512MB", fact(d, "web-small", "resources"))
    check(fact(d, "web-small", "labels") == "team=web", fact(d, "web-small", "labels"))
    check(fact(d, "web-small", "variables") == "API_TOKEN set", fact(d, "web-small", "variables"))
    check(SECRET_VALUE not in d.page_source, "the variable's value is not on the page")
    wait(d, "web-small's preflight", lambda: q(d, card("web-small") + ' .preflight li[data-provider="local"]'))
    check(q(d, card("web-small") + ' .preflight li[data-provider="local"]')[0].get_attribute("data-ok") == "true",
          "local honours web-small")
    st, e = s.api("GET", "/api/v1/environments/web-small")
    check(st == 200 and e["env_keys"] == ["API_TOKEN"] and "env" not in e, f"stored write-only: {e}")
    no_csp_violations(d)


def test_edit_and_stale(d, s):
    q(d, card("web-small") + " button.edit")[0].click()
    wait(d, "the edit form", lambda: text(d, "#env-form-title") == "Edit web-small")
    check(not q(d, "#env-id")[0].is_enabled(), "the id is fixed once created")
    check(q(d, "#env-vars .var-key")[0].get_attribute("value") == "API_TOKEN", "the variable's name is in the form")
    check(q(d, "#env-vars .var-value")[0].get_attribute("value") == "", "its value is not")
    fill(d, "#env-memory", "1GB")
    save(d)
    wait(d, "the edit listed", lambda: "memory 1GB" in fact(d, "web-small", "resources"))
    st, e = s.api("GET", "/api/v1/environments/web-small")
    check(e["resources"]["memory"] == "1GB" and e["env_keys"] == ["API_TOKEN"], f"saved, variable kept: {e}")

    # Changing the variables without re-entering a kept value is refused in the page.
    q(d, card("web-small") + " button.edit")[0].click()
    wait(d, "the edit form again", lambda: text(d, "#env-form-title") == "Edit web-small")
    q(d, "#add-var")[0].click()
    fill(d, "#env-vars .var-row:last-child .var-key", "REGION")
    fill(d, "#env-vars .var-row:last-child .var-value", "eu")
    save(d)
    wait(d, "the kept value asked for", lambda: any("Enter the value of API_TOKEN again" in t for t in texts(d, ".field-error")))

    # Someone else saves meanwhile: this edit is stale, refused with the 409 in words.
    q(d, card("web-small") + " button.edit")[0].click()
    wait(d, "the edit form, fresh", lambda: text(d, "#env-form-title") == "Edit web-small" and not q(d, ".field-error"))
    st, other = put_if_match(s, "/api/v1/environments/web-small", e["revision"],
                             {"provider": "local", "resources": {"cpu": 2, "memory": "1GB"}, "labels": {"team": "web"}})
    check(st == 200, f"the other client's edit: {st} {other}")
    fill(d, "#env-description", "my stale edit")
    save(d)
    wait(d, "the stale edit refused", lambda: q(d, "#env-stale"))
    said = text(d, "#env-stale")
    check("Not saved" in said and "revision" in said, f"the 409 in words: {said}")
    st, now = s.api("GET", "/api/v1/environments/web-small")
    check(now["description"] != "my stale edit" and now["resources"]["cpu"] == 2, f"the stale edit lost nothing: {now}")
    shot(d, "environments-stale")
    q(d, "#env-reload")[0].click()
    wait(d, "the current version in the form", lambda: q(d, "#env-cpu")[0].get_attribute("value") == "2")
    fill(d, "#env-description", "Small local sandbox, edited")
    save(d)
    wait(d, "the edit on the current revision saved", lambda: "Saved web-small" in text(d, "#env-status"))
    st, now = s.api("GET", "/api/v1/environments/web-small")
    check(now["description"] == "Small local sandbox, edited" and now["env_keys"] == ["API_TOKEN"], f"{now}")


def test_new_run_chooses_it(d, s):
    d.get(s.base + "/runs/new")
    wait(d, "the chooser filled", lambda: q(d, '#environment option[value="web-small"]'))
    chosen = d.execute_script("return document.getElementById('environment').value")
    check(chosen == "", f"without [run] environment nothing is preselected (as the API), not {chosen!r}")
    check(q(d, "#sandbox")[0].is_displayed(), "the sandbox provider field shows while no environment is chosen")
    q(d, '#environment option[value="web-small"]')[0].click()
    check(not q(d, "#sandbox")[0].is_displayed(), "no sandbox provider beside an environment")
    d.execute_script("document.getElementById('wf-source').value = arguments[0]", FLOW)
    q(d, "#create")[0].click()
    wait(d, "the run page", lambda: "/runs/01" in d.current_url and q(d, "#run-environment"))
    run_id = d.current_url.rstrip("/").split("/")[-1]
    check(text(d, "#run-environment") == "web-small (local)", f"the run page names it: {text(d, '#run-environment')}")
    wait(d, "the run to succeed", lambda: "succeeded" in text(d, "#run-status"), secs=60)
    st, run = s.api("GET", f"/api/v1/runs/{run_id}")
    plan = run["sandbox"]["plan"]
    check(plan["environment"] == "web-small" and plan["provider"] == "local", f"the frozen plan: {run['sandbox']}")
    shot(d, "run-page-environment")
    return run_id


def test_delete(d, s, run_id):
    d.get(s.base + "/environments")
    wait(d, "web-small listed", lambda: q(d, card("web-small") + " button.delete"))
    # Changed elsewhere since the page read it: the delete is refused with the 409 in words.
    st, e = s.api("GET", "/api/v1/environments/web-small")
    st, _ = put_if_match(s, "/api/v1/environments/web-small", e["revision"],
                         {"provider": "local", "description": "changed elsewhere"})
    check(st == 200, f"the other client's edit: {st}")
    q(d, card("web-small") + " button.delete")[0].click()
    d.switch_to.alert.accept()
    wait(d, "the stale delete refused", lambda: "web-small was not deleted" in text(d, "#env-status"))
    check("revision" in text(d, "#env-status"), text(d, "#env-status"))
    check(s.api("GET", "/api/v1/environments/web-small")[0] == 200, "still there")
    wait(d, "the list read again", lambda: "changed elsewhere" in text(d, card("web-small")))
    q(d, card("web-small") + " button.delete")[0].click()
    d.switch_to.alert.accept()
    wait(d, "web-small gone", lambda: not q(d, card("web-small")) and "Deleted web-small" in text(d, "#env-status"))
    check(s.api("GET", "/api/v1/environments/web-small")[0] == 404, "deleted on the server")
    st, run = s.api("GET", f"/api/v1/runs/{run_id}")
    check(run["sandbox"]["plan"]["environment"] == "web-small", "the run keeps its frozen plan")


def test_run_default_preselected(d, binary):
    """With `[run] environment` set, the chooser preselects it, and a run created without
    touching the chooser gets it."""
    s = Server(binary, '[run]\nenvironment = "ci"\n')
    try:
        st, _ = s.api("POST", "/api/v1/environments", {"id": "ci", "provider": "local", "resources": {"cpu": 1}})
        check(st == 201, f"create ci: {st}")
        d.get(s.base + "/")
        d.delete_all_cookies()  # cookies are per host, not per port: the other server's session
        sign_in(d, s)
        d.get(s.base + "/runs/new")
        wait(d, "the chooser filled", lambda: q(d, '#environment option[value="ci"]'))
        chosen = d.execute_script("return document.getElementById('environment').value")
        check(chosen == "ci", f"[run] environment preselected, not {chosen!r}")
        check("server default" in text(d, '#environment option[value="ci"]'), text(d, '#environment option[value="ci"]'))
        d.execute_script("document.getElementById('wf-source').value = arguments[0]", FLOW)
        q(d, "#create")[0].click()
        wait(d, "the run page", lambda: "/runs/01" in d.current_url and q(d, "#run-environment"))
        run_id = d.current_url.rstrip("/").split("/")[-1]
        check(s.api("GET", f"/api/v1/runs/{run_id}")[1]["sandbox"]["plan"]["environment"] == "ci", "the plan names ci")
    finally:
        s.stop()


def test_layout(d, s):
    s.api("POST", "/api/v1/environments", {"id": "wide-labels", "provider": "container", "network": "block",
                                           "resources": {"cpu": 4, "memory": "8GB", "pids": 512, "disk": "10GB"},
                                           "lifecycle": {"retention_hours": 24},
                                           "labels": {"team": "platform-infrastructure", "cost-centre": "engineering-4711"},
                                           "env": {"A_RATHER_LONG_VARIABLE_NAME": "x", "ANOTHER_ONE": "y"}})
    for width, height, name in [(1280, 900, "environments"), (390, 844, "phone-environments")]:
        d.set_window_size(width, height)
        d.get(s.base + "/environments")
        wait(d, f"the list at {width} px", lambda: q(d, card("wide-labels") + ' .preflight li'))
        no_horizontal_overflow(d, f"the environments page at {width} px")
        shot(d, name)
        d.get(s.base + "/runs/new")
        wait(d, f"the chooser at {width} px", lambda: q(d, '#environment option[value="wide-labels"]'))
        no_horizontal_overflow(d, f"the new-run form at {width} px")
    d.set_window_size(1400, 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", default=None, help="directory for screenshots")
    args = ap.parse_args()
    test_web.SHOTS = args.out
    s = Server(args.bin)
    d = browser()
    try:
        sign_in(d, s)
        for name, step in [("list, preflight, create, refusals", test_list_and_create),
                           ("edit and a stale edit", test_edit_and_stale)]:
            t = time.time()
            step(d, s)
            print(f"ok: {name} ({time.time() - t:.1f}s)", flush=True)
        t = time.time()
        run_id = test_new_run_chooses_it(d, s)
        print(f"ok: a run from the new-run form with the chosen environment ({time.time() - t:.1f}s)", flush=True)
        test_delete(d, s, run_id)
        print("ok: delete", flush=True)
        test_layout(d, s)
        print("ok: layout at 1280 px and phone width", flush=True)
        no_csp_violations(d)
        test_run_default_preselected(d, args.bin)
        print("ok: [run] environment preselected", flush=True)
    finally:
        d.quit()
        shutil.rmtree(d._svc_profile, ignore_errors=True)
        s.stop()


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
