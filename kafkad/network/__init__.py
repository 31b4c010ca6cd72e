"""The network room: listeners, connections, request framing and dispatch, the handler registry and the
sendfile writer. It knows the wire, not what a request means; security wraps it, the api room fills the registry."""
