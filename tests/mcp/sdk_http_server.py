"""An MCP server made with the official `mcp` Python SDK, served over HTTP for svc's tests.
Usage: sdk_http_server.py (streamable-http|sse) PORT. Tools: `add` (structured result),
`shout` (text), `whoami` (echoes the request's X-Team header: proves headers arrive).
"""
import sys

from mcp.server.mcpserver import Context, MCPServer

transport, port = sys.argv[1], int(sys.argv[2])
mcp = MCPServer("svc-test-sdk", version="1.0.0")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool()
def shout(text: str) -> str:
    """Returns the text in capitals."""
    return text.upper()


@mcp.tool()
def whoami(ctx: Context) -> str:
    """Says which team the request's X-Team header names."""
    req = ctx.request_context.request
    team = req.headers.get("x-team", "") if req is not None else ""
    return "team=" + team


if transport == "sse":
    mcp.run("sse", host="127.0.0.1", port=port)
else:
    mcp.run("streamable-http", host="127.0.0.1", port=port)
