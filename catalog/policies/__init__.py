"""The policy engine: from a RoutingDecision and the catalog, what a model may see (bundle.py), and everything a
policy is made of and checked by. Pure logic over plain data (decision.py's CatalogEntry) beside the models;
writes only policy versions (versions.py). Imports nothing of agents.
"""
