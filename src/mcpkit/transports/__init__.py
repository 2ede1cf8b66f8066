"""Transports move bytes between a peer and a ServerSession; they hold no protocol logic."""
