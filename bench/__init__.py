"""The benchmark program of ctxweb (SPEC §8): `make bench`, or `make bench-quick` in CI."""
