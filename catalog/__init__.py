"""catalog: what tools exist and what they may do. Never imports agents; agents reads it through small functions.

- models/       every table of the app (__init__.py) and what their fields are checked, counted and
                encrypted with (schemas.py, tokens.py, secrets.py);
- policies/     the policy engine: RoutingDecision (decision.py), the capability bundle (bundle.py), deferral,
                the archive section, staged schemas and flows, policy versions, reads (selectors.py),
                imports of tool definitions, system checks;
- search/       tool search: the index (BM25 + dense), the embedding models and their vectors, tool examples;
- knowledge/    knowledge snippets: selection for a request, versions, review;
- mcp_client/   toolhub as a client of MCP servers: connections and calls, sync, names, content, resources;
- web/          the dashboard pages of the catalog, policies, knowledge and MCP servers (views, forms, urls).

tasks.py holds the Celery entry points only. Imports run down: web -> mcp_client, knowledge, search, policies
-> models.
"""
