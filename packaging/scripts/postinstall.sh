#!/bin/sh
# kafkad postinstall (deb: "configure <old-version>", rpm: $1 = instance count: 1 install, 2 upgrade).
# Creates the kafkad system user and the data/log dirs; reloads systemd only where systemd runs.
set -e

upgrade=0
case "$1" in
    configure) [ -n "$2" ] && upgrade=1 ;;
    2) upgrade=1 ;;
esac

if ! getent passwd kafkad >/dev/null 2>&1; then
    if command -v systemd-sysusers >/dev/null 2>&1; then
        systemd-sysusers /usr/lib/sysusers.d/kafkad.conf || true
    fi
fi
if ! getent passwd kafkad >/dev/null 2>&1; then
    useradd --system --user-group --home-dir /var/lib/kafkad --no-create-home \
        --shell /usr/sbin/nologin --comment "kafkad broker" kafkad
fi

if command -v systemd-tmpfiles >/dev/null 2>&1; then
    systemd-tmpfiles --create /usr/lib/tmpfiles.d/kafkad.conf || true
fi
# Also without systemd-tmpfiles (containers, chroots): the broker needs these to exist and be its own.
for d in /var/lib/kafkad /var/lib/kafkad/data /var/log/kafkad; do
    install -d -m 0750 -o kafkad -g kafkad "$d"
done

if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
    if [ "$upgrade" = 1 ]; then
        systemctl try-restart kafkad.service || true
    fi
fi
exit 0
