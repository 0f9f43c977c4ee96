"""The server process: client connections, authentication, listener and lifecycle."""
