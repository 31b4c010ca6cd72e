#!/bin/sh
# kafkad postremove. The data in /var/lib/kafkad, the logs and the kafkad user are kept on purpose:
# a broker's partitions outlive its package (reinstall picks them up). Delete them by hand if wanted.
set -e

if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
