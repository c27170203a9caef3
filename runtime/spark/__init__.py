"""StreamApp runtime: spark."""
