"""What a web process does as gunicorn loads the application (ctxweb/wsgi.py)."""

import os
import subprocess
import sys


def test_a_web_process_moves_what_it_loaded_out_of_the_garbage_collectors_reach():
    """Django, the URLs with every view and the API are loaded, then frozen (gc.freeze): a full
    collection set off by a request no longer walks them."""
    script = ("import gc, os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'ctxweb.settings'); "
              "before = gc.get_freeze_count(); import ctxweb.wsgi; "
              "print(before, gc.get_freeze_count(), 'sessions.http.api' in sys.modules, 'sessions.dashboard.views' in sys.modules, "
              "len(gc.get_objects()))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "DEBUG": "1"}).stdout.split()
    before, frozen, api, views, tracked = out
    assert (before, api, views) == ("0", "True", "True"), out
    assert int(frozen) > 50_000 and int(tracked) < int(frozen) / 10, out
