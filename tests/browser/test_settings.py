#!/usr/bin/env python3
"""The settings page in a real headless Chromium (issue 29): an admin stores two provider
keys through the page's secrets form, presses "Test providers" and sees the provider that
answers marked as working and the one that refuses the key marked as failing with the
provider's own words; removes a key; sees the integrations and run defaults; the board
shows today's spend against the daily cap. Both providers are local scripted servers
speaking the real wire formats (Anthropic Messages; an OpenAI-style 401 error body).

    python3 tests/browser/test_settings.py --bin target/debug/svc
"""
import argparse
import http.server
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_web import Server, browser, check, wait, q, text, sign_in, no_csp_violations  # noqa: E402


class Provider:
    """A local LLM endpoint: `ok` answers every POST as an Anthropic Messages reply; else
    every POST is refused with OpenAI's 401 error body."""

    def __init__(self, ok):
        self.requests = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append((self.path, dict(self.headers), body))
                if ok:
                    status, out = 200, {
                        "id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model", "m"),
                        "content": [{"type": "text", "text": "OK"}], "stop_reason": "end_turn",
                        "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}
                else:
                    status, out = 401, {"error": {"message": "Incorrect API key provided: sk-revo***. You can find your API key at https://platform.openai.com/account/api-keys.",
                                                  "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
                raw = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()


def set_secret(d, name, value):
    row = f'#secrets-table tr[data-secret="{name}"]'
    wait(d, f"the {name} row", lambda: q(d, row))
    q(d, row + " input")[0].send_keys(value)
    q(d, row + " button.set-secret")[0].click()
    wait(d, f"{name} stored", lambda: q(d, row + '[data-set="true"]'))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    good, bad = Provider(True), Provider(False)
    s = Server(args.bin, f'[llm.providers.anthropic]\nbase_url = "{good.base}"\n'
                         f'[llm.providers.openai]\nbase_url = "{bad.base}"\n'
                         '[server]\nmax_usd_per_day = 5.0\n')
    d = browser()
    try:
        sign_in(d, s)
        # The board says how much of the daily cap today's runs spent.
        wait(d, "the daily cap on the board", lambda: "of the $5.00 daily cap" in text(d, "#daily-cap"))
        print("board: " + text(d, "#daily-cap"))

        d.get(s.base + "/settings")
        wait(d, "the settings page", lambda: q(d, "#secrets-table tbody tr"))
        check("Settings" in text(d, "main h1"), "page title")
        wait(d, "the integrations", lambda: q(d, '#integrations-list li[data-integration="codehost"]'))
        check('"max_usd"' in text(d, "#run-defaults-json") or "{" in text(d, "#run-defaults-json"), "run defaults shown")

        # Keys through the form; values never come back.
        set_secret(d, "ANTHROPIC_API_KEY", "sk-ant-good-0123456789")
        set_secret(d, "OPENAI_API_KEY", "sk-revoked-0123456789")
        check("sk-ant-good" not in d.page_source, "a stored value is not shown")
        st, listed = s.api("GET", "/api/v1/secrets")
        check(st == 200 and any(x["name"] == "ANTHROPIC_API_KEY" and x["set"] for x in listed["data"]), f"vault: {listed}")

        # The test button: one provider works, the other fails in the provider's words.
        q(d, "#test-providers")[0].click()
        ok_row, bad_row = 'tr[data-provider="anthropic"]', 'tr[data-provider="openai"]'
        wait(d, "the probe results", lambda: q(d, ok_row) and q(d, bad_row), secs=60)
        check(text(d, ok_row + " .status") == "works", f"anthropic: {text(d, ok_row)}")
        check("answered in" in text(d, ok_row + " .message"), f"anthropic: {text(d, ok_row)}")
        check(text(d, bad_row + " .status") == "fails", f"openai: {text(d, bad_row)}")
        words = text(d, bad_row + " .message")
        check("Incorrect API key" in words, f"the failure in words: {words}")
        check("1 provider(s) failed" in text(d, "#provider-test-status"), text(d, "#provider-test-status"))
        check(good.requests and good.requests[0][1].get("x-api-key") == "sk-ant-good-0123456789",
              "the probe used the stored key")
        print(f"providers: anthropic {text(d, ok_row + ' .message')}; openai: {words}")

        # Remove a key: the row says so, and the vault no longer has it.
        row = 'tr[data-secret="OPENAI_API_KEY"]'
        q(d, row + " button.remove-secret")[0].click()
        wait(d, "OPENAI_API_KEY removed", lambda: q(d, row + '[data-set="false"]'))
        check("OPENAI_API_KEY removed" in text(d, "#secret-status"), text(d, "#secret-status"))
        st, listed = s.api("GET", "/api/v1/secrets")
        check(not any(x["name"] == "OPENAI_API_KEY" and x["set"] for x in listed["data"]), f"vault: {listed}")
        no_csp_violations(d)
        print("settings page: ok")
    finally:
        d.quit()
        s.stop()
        good.stop()
        bad.stop()


if __name__ == "__main__":
    main()
