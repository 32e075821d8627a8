"""Demo seed data for toolhub: builtin and Loyalty tools, domains, knowledge, models."""
