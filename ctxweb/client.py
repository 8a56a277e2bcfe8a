"""The Python client, under the name it had before it became its own distribution (ctxweb-client, in
clients/python): `import ctxweb.client` gives the very module `ctxweb_client`, so its classes are the same
objects under either name. Kept for one release; import `ctxweb_client` instead."""

import sys

import ctxweb_client

sys.modules[__name__] = ctxweb_client
