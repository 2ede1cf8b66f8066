"""Transports move bytes between a peer and a ServerSession; they hold no protocol logic."""

#: seconds the requests in flight get to finish once a server is told to stop (SIGTERM, SIGINT;
#: on stdio also the end of its input), before they are cancelled: ``--shutdown-timeout``
SHUTDOWN_TIMEOUT = 5.0
