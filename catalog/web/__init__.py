"""The catalog's dashboard pages: tools and their examples and the knowledge review queue (views.py, forms.py),
policies (policy_views.py: editor, versions, rollback, simulation, four-eyes changes; review_views.py and
review_forms.py: the review queue of proposed policies) and MCP servers
(mcp_views.py, mcp_forms.py); urls.py mounts them, converters.py reads a tool name in a path. Views parse, call
logic, render; no rule lives here.
"""
