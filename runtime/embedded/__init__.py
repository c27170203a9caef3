"""StreamApp runtime: embedded."""
