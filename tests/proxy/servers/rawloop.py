"""The stdin loop of the raw stdio test servers (hostile.py, rugpull.py, escape.py, bracedresource.py):
one JSON message a line, anything else skipped; imported from the script's own folder."""

import json
import sys


def serve(handle):
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message)


def send(msg):
    """One message on stdout, flushed at once (the client waits for it)."""
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()
