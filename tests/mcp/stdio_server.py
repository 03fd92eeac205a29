"""A scripted stdio MCP server for svc's tests: well-behaved by default, misbehaving on
request. Usage: stdio_server.py MODE [LOG]. Every message it receives is appended to LOG
(one JSON per line) when given, so tests can see what svc sent.

Modes: ok, exit, hang, garbage, oversize, wrong-id, silent-call, version, server-requests,
pages, slow-start (sleeps argv[3] seconds before reading), barrier (on `initialize`, writes a
file into directory argv[3] and answers only once argv[4] servers have: servers whose
handshakes run one after another never get there).
"""
import json
import sys
import time

mode = sys.argv[1]
log = open(sys.argv[2], "a") if len(sys.argv) > 2 else None


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def record(msg):
    if log:
        log.write(json.dumps(msg) + "\n")
        log.flush()


TOOLS = [
    {"name": "echo", "description": "Echoes its text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object"}},
    {"name": "sleep", "description": "Sleeps.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
]

if mode == "exit":
    sys.stderr.write("fatal: cannot open the database /nonexistent/db\n")
    sys.stderr.flush()
    sys.exit(3)
if mode == "slow-start":
    time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0.5)
if mode == "garbage":
    for i in range(3):
        sys.stdout.write("Server starting... (line %d)\n" % i)
    sys.stdout.flush()
if mode == "oversize":
    sys.stdout.write("{\"jsonrpc\": \"2.0\", \"x\": \"" + "a" * (17 * 1024 * 1024) + "\"}\n")
    sys.stdout.flush()

extra_tool_listed = False
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    record(msg)
    method = msg.get("method")
    mid = msg.get("id")
    if mode in ("hang", "garbage", "oversize"):
        continue
    if method == "initialize":
        if mode == "barrier":
            import os
            os.makedirs(sys.argv[3], exist_ok=True)
            open(os.path.join(sys.argv[3], str(os.getpid())), "w").close()
            deadline = time.time() + 30
            while len(os.listdir(sys.argv[3])) < int(sys.argv[4]) and time.time() < deadline:
                time.sleep(0.01)
        if mode == "wrong-id":
            send({"jsonrpc": "2.0", "id": 999, "result": {}})
            continue
        version = "1999-01-01" if mode == "version" else msg["params"]["protocolVersion"]
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "scripted", "version": "1.2.3"}}})
    elif method == "notifications/initialized":
        if mode == "server-requests":
            send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
            send({"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage",
                  "params": {"messages": []}})
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "warning", "data": "low disk"}})
    elif method == "tools/list":
        cursor = (msg.get("params") or {}).get("cursor")
        if mode == "pages":
            if cursor is None:
                send({"jsonrpc": "2.0", "id": mid,
                      "result": {"tools": TOOLS[:1], "nextCursor": "page-2"}})
            elif cursor == "page-2":
                tools = TOOLS[1:]
                if extra_tool_listed:
                    tools = tools + [{"name": "added", "inputSchema": {"type": "object"}}]
                send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
            else:
                send({"jsonrpc": "2.0", "id": mid,
                      "error": {"code": -32602, "message": "bad cursor"}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        args = msg["params"].get("arguments") or {}
        if mode == "silent-call":
            continue
        if name == "echo":
            # The call changes the list: say so before answering, so the client has read the
            # notification by the time it has the answer (sent after, it may still be in the
            # pipe when the agent asks the model again, and the test would race it).
            if mode == "pages" and not extra_tool_listed:
                extra_tool_listed = True
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "echo: " + args.get("text", "")}]}})
        elif name == "fail":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "the thing is broken"}], "isError": True}})
        elif name == "sleep":
            time.sleep(float(args.get("seconds", 1)))
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "slept"}]}})
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32602, "message": "Unknown tool: " + name}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif mid is not None and method is None:
        pass  # an answer to one of our requests: recorded above
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": "Method not found"}})
