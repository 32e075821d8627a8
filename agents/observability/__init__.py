"""What toolhub tells the monitoring people already run: the Prometheus `/metrics` endpoint.

Entry points: `metrics.collect()` (the metric families, read from the database at scrape time) and
`views.metrics` (the endpoint, behind TOOLHUB_METRICS_TOKEN). Reads models of agents and catalog; never writes,
never imports the turn runtime.
"""
