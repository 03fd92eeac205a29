#!/usr/bin/env python3
"""The insights page in a real headless Chromium (issue 29): an admin runs the documented
example (runs per day by status) over a few real runs with one click and sees the same rows
the API answers, in a table and in an SVG chart with one bar (then one point) per row; a
hostile query (`DELETE FROM runs`) is refused with the server's message and deletes nothing;
a query is saved under a slug, found again after a reload, loaded back into the box, replaced
(If-Match) and deleted; the page fits 1280 px and a phone's width. A signed-in user without
admin rights (a JWT for `bob`, made by the Rust harness) sees "admins only", not a broken page.

    python3 tests/browser/test_insights.py --bin target/debug/svc [--out DIR] [--bob-bearer JWT]

`--bob-bearer` needs the server to trust its signer: the harness sets SVC_JWT_PUBLIC_KEY,
which the server started here inherits.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_web  # noqa: E402
from test_web import (Server, browser, check, wait, q, text, sign_in, no_csp_violations,  # noqa: E402
                      no_horizontal_overflow, shot, TINY)

SAMPLE = "runs-per-day-by-status"
SAVED_SQL = "SELECT status, count(*) AS runs FROM insights_runs GROUP BY status ORDER BY status"
REPLACED_SQL = "SELECT status, count(*) AS n FROM insights_runs GROUP BY status ORDER BY n DESC"


def wait_done(s, ids):
    deadline = time.time() + 60
    for rid in ids:
        while s.api("GET", f"/api/v1/runs/{rid}")[1]["lifecycle"]["status"]["kind"] != "succeeded":
            check(time.time() < deadline, f"run {rid} to succeed")
            time.sleep(0.1)


def table_rows(d):
    return d.execute_script(
        "return [...document.querySelectorAll('#result-table tbody tr')]"
        ".map(tr => [...tr.cells].map(td => td.textContent))")


def as_cells(rows):
    return [["null" if v is None else str(v) for v in row] for row in rows]


def set_sql(d, sql):
    d.execute_script("document.getElementById('sql').value = arguments[0]", sql)


def marks(d, css):
    return d.execute_script(f"return document.querySelectorAll('#chart-svg {css}').length")


def saved(s, qid):
    return s.api("GET", f"/api/v1/insights/queries/{qid}")


def raw(s, method, path, body, headers):
    """A request with headers of its own (If-Match, Accept): (status, body text)."""
    req = urllib.request.Request(s.base + path, method=method, data=json.dumps(body).encode(), headers={
        "Authorization": "Bearer " + s.token, "Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_sample(d, s):
    d.get(s.base + "/insights")
    wait(d, "the insights page", lambda: q(d, f'button.sample[data-sample="{SAMPLE}"]'))
    check(text(d, "main h1") == "Insights", "page title")
    check(q(d, 'header nav a[href="/insights"]'), "the header links the page")
    st, schema = s.api("GET", "/api/v1/insights/schema")
    sql = next(x["sql"] for x in schema["samples"] if x["id"] == SAMPLE)
    st, want = s.api("POST", "/api/v1/insights/query", {"sql": sql})
    check(st == 200 and len(want["rows"]) >= 2, f"the API's answer: {st} {want}")

    q(d, f'button.sample[data-sample="{SAMPLE}"]')[0].click()
    wait(d, "the example's table", lambda: q(d, "#result-table tbody tr"))
    check(d.execute_script("return document.getElementById('sql').value") == sql, "the example is in the box")
    got = table_rows(d)
    check(got == as_cells(want["rows"]), f"table rows {got} != API rows {want['rows']}")
    heads = d.execute_script("return [...document.querySelectorAll('#result-table th')].map(th => th.textContent)")
    check(heads == want["columns"], f"columns {heads}")
    check(f"{len(want['rows'])} rows" in text(d, "#query-status"), text(d, "#query-status"))

    # One bar per row, each as tall as its value relative to the others.
    check(marks(d, "rect.bar") == len(want["rows"]), f"{marks(d, 'rect.bar')} bars for {len(want['rows'])} rows")
    heights = d.execute_script("return [...document.querySelectorAll('#chart-svg rect.bar')]"
                               ".map(r => parseFloat(r.getAttribute('height')))")
    counts = [row[2] for row in want["rows"]]
    top = max(counts)
    for h, c in zip(heights, counts):
        check(abs(h / max(heights) - c / top) < 0.02, f"bar heights {heights} for counts {counts}")
    legend = d.execute_script("return [...document.querySelectorAll('#chart-legend li')].map(li => li.textContent)")
    check(sorted(legend) == sorted({row[1] for row in want["rows"]}), f"legend {legend}")
    check("runs by day" in text(d, "#chart-svg .axis-name"), text(d, "#chart-svg .axis-name"))
    shot(d, "insights-1280")

    # The same answer as a line: one point per row.
    d.execute_script("const k = document.getElementById('chart-kind'); k.value = 'line';"
                     "k.dispatchEvent(new Event('change'))")
    wait(d, "the line chart", lambda: q(d, '#chart-svg[data-kind="line"]'))
    check(marks(d, "circle.point") == len(want["rows"]), f"{marks(d, 'circle.point')} points")
    check(marks(d, "polyline.line") == len(legend), "one line per status")
    check(marks(d, "rect.bar") == 0, "no bars left over")
    print(f"example: {len(want['rows'])} rows, table and chart agree")


def test_refusals(d, s):
    before = s.api("GET", "/api/v1/runs?page[limit]=100")[1]["data"]
    set_sql(d, "DELETE FROM runs")
    q(d, "#run-query")[0].click()
    wait(d, "the refusal", lambda: q(d, "#query-status .error"))
    words = text(d, "#query-status .error")
    st, api_err = s.api("POST", "/api/v1/insights/query", {"sql": "DELETE FROM runs"})
    detail = api_err["errors"][0]["detail"]
    check(st == 422 and detail in words, f"the server's words {detail!r} in {words!r}")
    check("read-only" in words, words)
    check(not q(d, "#result")[0].is_displayed(), "the earlier answer is not shown as this one's")
    after = s.api("GET", "/api/v1/runs?page[limit]=100")[1]["data"]
    check(len(after) == len(before), "no run deleted")
    # SQL that does not compile says where.
    set_sql(d, "SELEC 1")
    q(d, "#run-query")[0].click()
    wait(d, "the syntax error", lambda: "does not compile" in text(d, "#query-status .error"))
    print("refused: " + words)


def test_saved(d, s):
    # A bad slug is refused in the page, before any request.
    set_sql(d, SAVED_SQL)
    q(d, "#save-id")[0].send_keys("Not A Slug")
    q(d, "#save-query")[0].click()
    wait(d, "the slug rule", lambda: "slug" in text(d, "#saved-status .error"))
    check(q(d, "#save-id")[0].get_attribute("aria-invalid") == "true", "the id field is marked")

    box = q(d, "#save-id")[0]
    box.clear()
    box.send_keys("runs-by-status")
    name = q(d, "#save-name")[0]
    name.clear()
    name.send_keys("Runs by status")
    q(d, "#save-query")[0].click()
    item = 'li[data-query="runs-by-status"]'
    wait(d, "saved", lambda: "Saved" in text(d, "#saved-status"))
    check(q(d, item), "the saved query listed")
    st, stored = saved(s, "runs-by-status")
    check(st == 200 and stored["sql"] == SAVED_SQL and stored["name"] == "Runs by status", f"stored: {st} {stored}")

    # After a reload the list still has it; Load puts it back in the box and runs it.
    d.refresh()
    wait(d, "the list after a reload", lambda: q(d, item + " .load-query"))
    check(d.execute_script("return document.getElementById('sql').value") == "", "the box starts empty")
    q(d, item + " .load-query")[0].click()
    wait(d, "the loaded query's table", lambda: q(d, "#result-table tbody tr"))
    check(d.execute_script("return document.getElementById('sql').value") == SAVED_SQL, "loaded into the box")
    check(q(d, "#save-id")[0].get_attribute("value") == "runs-by-status" or
          d.execute_script("return document.getElementById('save-id').value") == "runs-by-status", "its id to save under")
    st, want = s.api("POST", "/api/v1/insights/query", {"sql": SAVED_SQL})
    check(table_rows(d) == as_cells(want["rows"]), f"{table_rows(d)} != {want['rows']}")
    check(marks(d, "rect.bar") == len(want["rows"]), "one bar per row")
    # The address names it: a reload opens it again, an unknown id says so.
    check(d.current_url.endswith("/insights?query=runs-by-status"), d.current_url)
    d.refresh()
    wait(d, "the query again after a reload", lambda: q(d, "#result-table tbody tr"))
    check(d.execute_script("return document.getElementById('sql').value") == SAVED_SQL, "back in the box")
    d.get(s.base + "/insights?query=gone")
    wait(d, "an unknown saved query in words", lambda: "no saved query `gone`" in text(d, "#query-status .error"))
    d.get(s.base + "/insights?query=runs-by-status")
    wait(d, "the saved query by its address", lambda: q(d, "#result-table tbody tr"))

    # Someone else changes it meanwhile: the page's Save (If-Match of the revision it listed)
    # is refused with the server's words, and the next Save, on the fresh revision, works.
    st, body = raw(s, "PUT", "/api/v1/insights/queries/runs-by-status",
                   {"name": "Runs by status", "sql": SAVED_SQL + " LIMIT 50"}, {"If-Match": f'"{stored["revision"]}"'})
    check(st == 200, f"the other change: {st} {body}")
    set_sql(d, REPLACED_SQL)
    q(d, "#save-query")[0].click()
    wait(d, "the stale save refused", lambda: q(d, "#saved-status .error"))
    check("has changed" in text(d, "#saved-status .error"), text(d, "#saved-status .error"))
    check(saved(s, "runs-by-status")[1]["sql"] == SAVED_SQL + " LIMIT 50", "the other change is kept")
    # Saving again, on the revision the list now has, replaces it.
    q(d, "#save-query")[0].click()
    wait(d, "replaced", lambda: "Replaced" in text(d, "#saved-status"))
    st, now = saved(s, "runs-by-status")
    check(now["sql"] == REPLACED_SQL and now["revision"] != stored["revision"], f"replaced: {now}")
    st, listed = s.api("GET", "/api/v1/insights/queries")
    check([x["id"] for x in listed["data"]] == ["runs-by-status"], f"one saved query: {listed}")
    # A query the server refuses cannot be saved, and the page says why.
    set_sql(d, "DELETE FROM runs")
    box = q(d, "#save-id")[0]
    box.clear()
    box.send_keys("hostile")
    q(d, "#save-query")[0].click()
    wait(d, "the refused save", lambda: q(d, "#saved-status .error"))
    check("read-only" in text(d, "#saved-status .error"), text(d, "#saved-status .error"))
    check(saved(s, "hostile")[0] == 404, "nothing saved")

    # Delete asks once more, then removes it (If-Match again).
    q(d, item + " .delete-query")[0].click()
    wait(d, "the confirmation", lambda: "Really" in text(d, item + " .delete-query"))
    check(saved(s, "runs-by-status")[0] == 200, "not deleted on the first click")
    q(d, item + " .delete-query")[0].click()
    wait(d, "the query gone", lambda: not q(d, item))
    check(saved(s, "runs-by-status")[0] == 404, "deleted in the catalog")
    print("saved queries: save, reload, load, replace, refuse, delete")


def test_answers(d, s):
    """Ctrl+Enter runs; a chart's bars go below the axis for negative values; an answer with
    no numeric column after the first says there is no chart; the CSV download is the API's
    CSV."""
    d.get(s.base + "/insights")
    wait(d, "the query box", lambda: q(d, "#sql"))
    box = q(d, "#sql")[0]
    box.send_keys("SELECT 'loss' AS k, -2 AS v UNION ALL SELECT 'none', NULL UNION ALL SELECT 'gain', 3")
    box.send_keys(test_web.Keys.CONTROL, test_web.Keys.ENTER)
    wait(d, "the answer of Ctrl+Enter", lambda: len(q(d, "#result-table tbody tr")) == 3)
    bars = d.execute_script(
        "const axis = document.querySelector('#chart-svg line.axis'); const y0 = parseFloat(axis.getAttribute('y1'));"
        "return [...document.querySelectorAll('#chart-svg rect.bar')].map(r => [parseFloat(r.getAttribute('y')),"
        " parseFloat(r.getAttribute('height')), y0])")
    check(len(bars) == 3, f"one bar per row, the null one too: {bars}")
    (ly, lh, y0), (_, nh, _), (gy, gh, _) = bars
    check(abs(ly - y0) < 0.5 and lh > 0, f"the negative bar hangs below the axis: {bars}")
    check(nh == 0, f"the null bar is flat: {bars}")
    check(abs(gy + gh - y0) < 0.5 and abs(gh / lh - 1.5) < 0.02, f"the positive bar stands on the axis: {bars}")
    check("null" in text(d, "#result-table tbody tr:nth-child(2)"), "null shown in words")

    set_sql(d, "SELECT status, workflow FROM insights_runs LIMIT 3")
    q(d, "#run-query")[0].click()
    wait(d, "no chart, in words", lambda: "needs a numeric column" in text(d, "#chart-none"))
    check(not q(d, "#chart-svg"), "no chart drawn")

    # An answer at the row cap: every row charted, the table cut at 1,000 rows and saying so.
    # Prints the time from the click to the drawn chart (a figure, not a check).
    big = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000)"
           " SELECT x, x % 97 AS v FROM c")
    for kind in ["bar", "line"]:
        set_sql(d, "SELECT 'one' AS k, 1 AS v")
        q(d, "#run-query")[0].click()
        wait(d, "a one-row answer first", lambda: len(q(d, "#result-table tbody tr")) == 1)
        d.execute_script("const k = document.getElementById('chart-kind'); k.value = arguments[0];"
                         "k.dispatchEvent(new Event('change'));"
                         "document.getElementById('sql').value = arguments[1]; window.__t = performance.now()", kind, big)
        q(d, "#run-query")[0].click()
        mark = "rect.bar" if kind == "bar" else "circle.point"
        wait(d, f"10,000 {kind} marks", lambda: marks(d, mark) == 10000, secs=60)
        took = d.execute_script("return new Promise(r => requestAnimationFrame(() => r(performance.now() - window.__t)))")
        print(f"10,000 rows as {kind}s: {took:.0f} ms from the click to the drawn chart")
    check(len(q(d, "#result-table tbody tr")) == 1000, "the table stops at 1,000 rows")
    check("first 1,000 of 10,000 rows" in text(d, "#result-rows .help"), text(d, "#result-rows .help"))

    folder = tempfile.mkdtemp(prefix="svc-insights-csv-")
    try:
        d.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": folder})
        sql = "SELECT status, count(*) AS runs FROM insights_runs GROUP BY status ORDER BY status"
        set_sql(d, sql)
        q(d, "#csv-query")[0].click()
        path = os.path.join(folder, "insights.csv")
        wait(d, "the CSV download", lambda: os.path.exists(path) and os.path.getsize(path) > 0)
        st, want = raw(s, "POST", "/api/v1/insights/query", {"sql": sql}, {"Accept": "text/csv"})
        with open(path, newline="") as f:
            got = f.read()
        check(st == 200 and got == want, f"the download {got!r} is the API's CSV {want!r}")
        check("Downloaded" in text(d, "#query-status"), text(d, "#query-status"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("answers: keyboard, negative and null bars, no-chart, CSV download")


def test_layout(d, s):
    for width, height in [(1280, 900), (390, 844)]:
        d.set_window_size(width, height)
        where = f"at {width} px"
        d.get(s.base + "/insights")
        wait(d, f"the page {where}", lambda: q(d, f'button.sample[data-sample="{SAMPLE}"]'))
        q(d, f'button.sample[data-sample="{SAMPLE}"]')[0].click()
        wait(d, f"the chart {where}", lambda: q(d, "#chart-svg rect.bar"))
        no_horizontal_overflow(d, f"the insights page {where}")
        box = d.execute_script(
            "const r = document.getElementById('chart-svg').getBoundingClientRect();"
            "return [r.left, r.right, document.documentElement.clientWidth]")
        check(box[0] >= 0 and box[1] <= box[2] + 0.5, f"the chart sticks out {where}: {box}")
        # The saved queries sit beside the query at 1280 px and under it on a phone.
        side = d.execute_script(
            "const a = document.getElementById('query').getBoundingClientRect(),"
            " b = document.getElementById('saved').getBoundingClientRect(); return [a.right, b.left, a.bottom, b.top]")
        if width == 1280:
            check(side[1] >= side[0], f"saved queries beside the query {where}: {side}")
        else:
            check(side[3] >= side[2], f"saved queries under the query {where}: {side}")
        shot(d, "insights-phone" if width == 390 else "insights-1280")
        d.execute_script("document.getElementById('result').scrollIntoView()")
        shot(d, "insights-result-phone" if width == 390 else "insights-result-1280")
    d.set_window_size(1400, 1000)
    no_csp_violations(d)


def test_not_admin(d, s, bearer):
    """A signed-in user without admin rights: every request carries bob's bearer JWT (no
    session cookie), and the page says insights are for admins."""
    d.delete_all_cookies()
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer " + bearer}})
    d.get(s.base + "/insights")
    wait(d, "the admins-only message", lambda: q(d, "#insights-denied"))
    words = text(d, "#insights-denied")
    check("admins only" in words, words)
    check(not q(d, "#sql") and not q(d, "#saved-list"), "no query box for a non-admin")
    check("/login" not in d.current_url, "not sent to sign in: bob is signed in")
    shot(d, "insights-not-admin")
    print("not an admin: " + words)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", default=None, help="directory for screenshots")
    ap.add_argument("--bob-bearer", default=None, help="a JWT for a signed-in user who is not an admin")
    args = ap.parse_args()
    test_web.SHOTS = args.out
    extra = ""
    if args.bob_bearer:
        extra = ('[server.auth]\nmethods = ["dev-token", "codehost"]\n'
                 '[server.auth.codehost]\nallowed_usernames = ["bob"]\n')
    s = Server(args.bin, extra)
    d = browser()
    try:
        # A few real runs: three finished, two created and never started.
        done = [s.create(TINY) for _ in range(3)]
        for _ in range(2):
            s.create(TINY, start=False)
        wait_done(s, done)
        sign_in(d, s)
        for what, step in [("the example", test_sample), ("refusals", test_refusals),
                           ("saved queries", test_saved), ("answers", test_answers),
                           ("layout", test_layout)]:
            print(f"-- {what}")
            step(d, s)
        no_csp_violations(d)
        if args.bob_bearer:
            print("-- not an admin")
            test_not_admin(d, s, args.bob_bearer)
        print("insights page: ok")
    finally:
        d.quit()
        shutil.rmtree(d._svc_profile, ignore_errors=True)
        s.stop()


if __name__ == "__main__":
    main()
