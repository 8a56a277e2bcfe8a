"""The benchmark program of ctxweb: `make bench`, or `make bench-quick` in CI."""
