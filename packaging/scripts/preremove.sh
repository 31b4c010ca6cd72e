#!/bin/sh
# kafkad preremove (deb: "remove" | "upgrade <new>" | ..., rpm: $1 = instances left: 0 removal, 1 upgrade).
# On removal: stop and disable the units. Upgrades keep the broker running until postinstall restarts it.
set -e

case "$1" in
    remove | 0) ;;
    *) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
    systemctl stop kafkad.service kafkad-ingest.timer kafkad-ingest.service >/dev/null 2>&1 || true
fi
if command -v systemctl >/dev/null 2>&1; then
    # --no-reload works offline too: it only removes the [Install] symlinks.
    systemctl --no-reload disable kafkad.service kafkad-ingest.timer >/dev/null 2>&1 || true
fi
exit 0
