"""The demo Loyalty MCP server: a real MCP program that serves the Loyalty tools of the demo catalog.

It imports only the pure data module demo.data.loyalty (never Django) and
keeps its state in its own small SQLite file. Run it with
`python -m demo.loyalty_mcp.server --db PATH`.
"""
