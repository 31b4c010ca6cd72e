"""The process shell: `main` wires the rooms together; systemd notification, health, metrics, netlink,
logging, and the background tasks (log cleaner, Spark bridge) it starts."""
