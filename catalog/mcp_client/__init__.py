"""toolhub as a client of MCP servers: connections and calls (client.py), keeping the catalog in step with what
each server serves (sync.py), catalog names and renames (names.py), results as plain data (content.py), live
resources and prompts (resources.py); their secrets are encrypted at rest by catalog.models.secrets. Serving MCP
is agents.mcp_gateway's job.
"""
