"""Public tool-retrieval benchmarks converted to the bench format (catalog.json + queries JSONL).

convert.py turns the raw files of ToolLens (quchangle1/COLT) and Seal-Tools (fairyshine/Seal-Tools) into
a catalog and their train/dev queries; test splits are never read. Committed samples live in bench/data/<name>/,
full outputs in var/datasets/<name>/ (see convert.py's docstring for the commands).
"""
