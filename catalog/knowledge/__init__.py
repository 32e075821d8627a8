"""Domain knowledge snippets (registry.py): select the ones relevant to a request, keep versions, track reviews
and staleness; the review queue's reads (selectors.py). The review pages are in catalog.web."""
