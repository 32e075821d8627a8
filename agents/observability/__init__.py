"""What toolhub tells the monitoring people already run: the Prometheus `/metrics` endpoint.

Entry points: `metrics.collect()` (the metric families, read at scrape time from the database, PostgreSQL's
connection statistics and the broker's turn queue: `broker.queue_depth`) and `views.metrics` (the endpoint, behind
TOOLHUB_METRICS_TOKEN). Reads models of agents and catalog; never writes, never publishes or consumes a broker
message, never imports the turn runtime.
"""
