"""StreamApp runtime: testing."""
