"""A failed device's evidence pack for its vendor: built and signed (`pack`), checked offline (`verify`)."""
