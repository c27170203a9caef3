"""StreamApp operator."""
