"""What the tests stand on, in one place: each module exists because several test folders (and some benchmarks
under bench/scripts/) need the same thing done one way.

- builders: a tool, a policy, a user in a role, old turns for retention; the short way to the rows a test needs.
- demo_snapshot: the demo catalog loaded once per process and copied back into each test (the `demo_catalog`
  fixture), since loading it costs about a second.
- migrated_db: the fast stage's migrated SQLite database, made once per code and copied into each worker.
- forkserver, fork_launch: test subprocesses (MCP servers, Daphne, Celery workers, manage.py) start as forks of
  one warm interpreter rather than importing Django and the MCP SDK afresh each time.
- servers: real Daphne, Celery worker and deploy/Procfile processes for the integration stage, and free ports.
- ensure_services: PostgreSQL and Redis answer before the integration stage starts, or it fails loudly.
- scripted_openai: an OpenAI-compatible HTTP server whose answers the test chooses (the real model path).
- generated_mcp_server: an MCP server of N similar tools over stdio, for the catalog sync and scale tests.
- mcp_asgi: /mcp driven in-process with raw JSON-RPC, for the gateway's protocol tests.
- console_socket: a minimal WebSocket client recording what the live console is sent.
- streams: a streamed chat completion read frame by frame, and what its stored events must show.
- otlp_receiver: a real OTLP/HTTP trace receiver (POST /v1/traces, decoded with opentelemetry-proto) that processes
  export to, for the traces tests.

test_forkserver and test_demo_snapshot test these helpers themselves: a stand-in must behave as what it stands for.
"""
