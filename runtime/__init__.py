"""StreamApp runtime."""
