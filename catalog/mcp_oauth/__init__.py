"""toolhub as an OAuth 2.1 client of upstream MCP servers that need it (the reverse of agents.mcp_gateway.oauth).

Entry points: `flow.begin_authorization` / `flow.finish_authorization` (the browser redirect flow, split in two so
no process waits for the callback: the page redirects, the callback view finishes), `flow.client_credentials`
(no browser), `auth.UpstreamOAuth` (what catalog.mcp_client.client attaches to a connection: the MCP SDK's
OAuthClientProvider over stored tokens, which refreshes them), `grants` (tokens in the database, encrypted).
Discovery, registration, PKCE and the token requests use the SDK's mcp.client.auth models and helpers; every
document read from an upstream is bounded in size and time (`http`). Never imports agents; an upstream token never
goes into a message, a log line or a page.
"""
