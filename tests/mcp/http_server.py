"""A scripted MCP server over HTTP for svc's tests. Usage: http_server.py MODE LOG.
Prints its port on the first line of stdout, then serves until killed. Every request is
appended to LOG as one JSON line: {method, path, headers (lowercase), body}.

Modes (Streamable HTTP at /mcp unless said):
  ok        sessions; initialize and tools/list answered as JSON, tools/call as an event
            stream that first asks the client to `ping` (the answer is POSTed back)
  500       every POST gets HTTP 500 with a text body
  bad-sse   tools/call answered with an event stream whose data is not JSON
  expire    the first request after initialize gets 404 (session forgotten) once
  silent    tools/call opens an event stream and never writes to it
  legacy    the legacy HTTP+SSE transport: GET /sse, an `endpoint` event, POST /messages
  older     as ok, but `initialize` answers protocol version 2025-03-26 whatever was offered
"""
import json
import queue
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

mode = sys.argv[1]
log_path = sys.argv[2]
lock = threading.Lock()
sessions = set()
expired_once = [False]
legacy_queues = {}

TOOLS = [{"name": "echo", "description": "Echoes its text.",
          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]


def record(handler, body):
    with lock, open(log_path, "a") as f:
        f.write(json.dumps({
            "method": handler.command, "path": handler.path,
            "headers": {k.lower(): v for k, v in handler.headers.items()},
            "body": body}) + "\n")


def result_for(msg):
    method = msg.get("method")
    if method == "initialize":
        version = "2025-03-26" if mode == "older" else msg["params"]["protocolVersion"]
        return {"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted-http", "version": "0.1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        text = (msg["params"].get("arguments") or {}).get("text", "")
        return {"content": [{"type": "text", "text": "echo: " + text}]}
    if method == "ping":
        return {}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def reply(self, status, body=b"", ctype="application/json", headers=()):
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self, headers=()):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True

    def event(self, data, name=None):
        text = ""
        if name:
            text += "event: %s\n" % name
        text += "data: %s\n\n" % data
        self.wfile.write(text.encode())
        self.wfile.flush()

    def do_DELETE(self):
        record(self, None)
        sessions.discard(self.headers.get("mcp-session-id"))
        self.reply(200)

    def do_GET(self):
        record(self, None)
        if mode != "legacy" or not self.path.startswith("/sse"):
            self.reply(405, b"")
            return
        sid = uuid.uuid4().hex
        q = queue.Queue()
        legacy_queues[sid] = q
        self.start_stream()
        self.event("/messages/?session_id=" + sid, "endpoint")
        while True:
            try:
                msg = q.get(timeout=0.5)
            except queue.Empty:
                try:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                except OSError:
                    return
                continue
            try:
                self.event(json.dumps(msg), "message")
            except OSError:
                return

    def do_POST(self):
        body = self.read_body()
        record(self, body)
        if mode == "legacy":
            sid = self.path.split("session_id=")[-1]
            q = legacy_queues.get(sid)
            if q is None:
                self.reply(404, b"unknown session")
                return
            self.reply(202, b"Accepted", "text/plain")
            if isinstance(body, dict) and body.get("id") is not None and body.get("method"):
                q.put({"jsonrpc": "2.0", "id": body["id"], "result": result_for(body)})
            return
        if mode == "500":
            self.reply(500, b"Internal Server Error: the database is down", "text/plain")
            return
        if not isinstance(body, dict):
            self.reply(400, b"")
            return
        method = body.get("method")
        mid = body.get("id")
        sid = self.headers.get("mcp-session-id")
        if method == "initialize":
            new = uuid.uuid4().hex
            sessions.add(new)
            out = json.dumps({"jsonrpc": "2.0", "id": mid, "result": result_for(body)}).encode()
            self.reply(200, out, headers=[("mcp-session-id", new)])
            return
        if sid not in sessions:
            self.reply(404, b'{"error": "unknown session"}')
            return
        if mode == "expire" and not expired_once[0] and method != "notifications/initialized":
            expired_once[0] = True
            sessions.discard(sid)
            self.reply(404, b'{"error": "session expired"}')
            return
        if mid is None or method is None:
            self.reply(202, b"")
            return
        if method == "tools/call":
            if mode == "bad-sse":
                self.start_stream()
                self.event("this is not json")
                return
            if mode == "silent":
                self.start_stream()
                time.sleep(30)
                return
            self.start_stream()
            self.event(json.dumps({"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"}))
            time.sleep(0.05)
            self.event(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result_for(body)}))
            return
        out = json.dumps({"jsonrpc": "2.0", "id": mid, "result": result_for(body)}).encode()
        self.reply(200, out)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
