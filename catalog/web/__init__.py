"""The catalog's dashboard pages: tools and their examples, policies (editor, versions, rollback, simulation),
the knowledge review queue (views.py, forms.py) and MCP servers (mcp_views.py, mcp_forms.py); urls.py mounts
them, converters.py reads a tool name in a path. Views parse, call logic, render; no rule lives here.
"""
