"""StreamApp runtime: kafka."""
