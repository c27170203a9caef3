"""StreamApp runtime: expressions."""
