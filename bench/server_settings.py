"""The benchmark server's settings: the product's, with one more address, the durable-write floor
(bench/floor_urls.py). Every server the benchmark starts (gunicorn and its task workers) runs with them."""

from ctxweb.settings import *  # noqa: F403

ROOT_URLCONF = "bench.floor_urls"
