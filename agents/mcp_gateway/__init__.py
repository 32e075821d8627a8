"""toolhub as an MCP server at /mcp (server.py, mounted by toolhub.asgi): tools with deferred loading per API key
(found_tools.py), direct calls decided by policy (direct_calls.py) and approved on the turns' approval path
(call_approvals.py), the imported servers' resources and prompts (resources.py), subscriptions and progress
relayed (subscriptions.py, progress.py), elicitation and sampling relayed to the calling client
(client_requests.py), authorization before the SDK (access.py, credentials.py, body_limits.py)
and the OAuth 2.1 authorization server for MCP clients (oauth.py, oauth_views.py, oauth_urls.py,
oauth_input.py). A new MCP feature goes here; talking to upstream MCP servers is catalog.mcp_client's job.
"""
