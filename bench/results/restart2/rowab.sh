#!/bin/bash
# Interleaved A/B of the bench's own recovery row (full mode, 10 GiB / 100 partitions): base = main's tree, head = branch's tree.
for i in 1 2 3; do
  if [ $((i % 2)) -eq 1 ]; then order="base head"; else order="head base"; fi
  for side in $order; do
    cd /tmp/r2/$side
    echo "=== pair $i $side load $(cut -d' ' -f1 /proc/loadavg)"
    PYTHONPATH=/tmp/r2/$side timeout 900 /work/wt/restart2/.venv/bin/python -m tests.bench.run --mode full --only recovery 2>&1 | grep -E "^\| recovery|loaded .* GiB"
  done
done
