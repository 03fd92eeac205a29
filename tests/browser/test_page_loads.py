#!/usr/bin/env python3
"""Page loads never stall (issue 32): a real headless Chromium opens a fresh browser context
(its own connections, nothing cached) and loads the sign-in page in it, 200 times one after
another, while another context stays connected and 20 SSE streams are open on the server.
Before the fix of tiny_http's connection pool some of these loads never finished (the
browser's parallel connections of one load were queued for one thread).

    python3 tests/browser/test_page_loads.py --bin target/debug/svc [--loads 200]

Prints the number of loads, the stalled ones and the slowest load; exits non-zero when any
load took longer than the stall bound (15 s, a liveness bound: a healthy load takes tens of
milliseconds).
"""
import argparse
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_web import Server, browser, check  # noqa: E402

HOLD = """digraph hold {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  start -> exit
}
"""

STALL = 15.0


def open_stream(s, run_id):
    """An SSE stream on a run that is never started, so it stays open; returns its socket."""
    c = socket.create_connection(("127.0.0.1", s.port), timeout=STALL)
    c.sendall((f"GET /api/v1/runs/{run_id}/attach HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Authorization: Bearer {s.token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = c.recv(4096)
        check(chunk, "an SSE stream closed before its head")
        head += chunk
    check(head.startswith(b"HTTP/1.1 200"), f"SSE stream: {head[:60]!r}")
    return c


def load_in_fresh_context(d, url):
    """Loads `url` in a new browser context (a WebDriver BiDi user context: its own cookies,
    cache and connections); answers the seconds until the page was complete, or None when it
    was not within the stall bound."""
    result = {}

    def navigate():
        try:
            d.browsing_context.navigate(context=ctx, url=url, wait="complete")
            result["took"] = time.monotonic() - t0
        except Exception as e:  # reported as a stall below, with the error
            result["error"] = repr(e)

    uc = d.browser.create_user_context()
    ctx = d.browsing_context.create(type="tab", user_context=uc)
    t0 = time.monotonic()
    nav = threading.Thread(target=navigate, daemon=True)
    nav.start()
    nav.join(STALL)
    d.browsing_context.close(ctx)
    d.browser.remove_user_context(uc)
    if "error" in result:
        print(f"a load failed: {result['error']}", file=sys.stderr)
    return result.get("took")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--loads", type=int, default=200)
    ap.add_argument("--streams", type=int, default=20)
    args = ap.parse_args()
    s = Server(args.bin)
    d = browser(bidi=True)
    streams = []
    try:
        run_id = s.create(HOLD, start=False)
        streams = [open_stream(s, run_id) for _ in range(args.streams)]
        d.get(s.base + "/")  # the context that stays connected
        took, stalled = [], 0
        for _ in range(args.loads):
            t = load_in_fresh_context(d, s.base + "/")
            if t is None:
                stalled += 1
            else:
                took.append(t)
        took.sort()
        slowest = f"{took[-1] * 1000:.0f} ms" if took else "-"
        median = f"{took[len(took) // 2] * 1000:.0f} ms" if took else "-"
        print(f"page loads: {args.loads} in fresh contexts beside {args.streams} SSE streams: "
              f"{stalled} stalled (> {STALL:.0f} s), median {median}, slowest {slowest}")
        check(stalled == 0, f"{stalled} of {args.loads} page loads stalled")
    finally:
        for c in streams:
            c.close()
        d.quit()
        s.stop()


if __name__ == "__main__":
    main()
