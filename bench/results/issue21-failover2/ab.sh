#!/bin/bash
# usage: ab.sh TAG PAIRS LEADER_RUNS CTRL_RUNS  (base=/tmp/fo2/base, head=/tmp/fo2/head)
here=$(cd "$(dirname "$0")" && pwd)
tag=$1; pairs=$2; lr=$3; cr=$4
mkdir -p /tmp/fo2/ab
for i in $(seq 1 $pairs); do
  for side in base head; do
    cd /tmp/fo2/$side
    echo "== $side $i $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/fo2/ab/$tag.txt
    FO_WORK=/tmp/fo2/run-$side PYTHONPATH=$PWD timeout 900 .venv/bin/python $here/failover.py 1000 $lr $cr 2>&1 | grep -E "^(leader|controller) kill [0-9]" >> /tmp/fo2/ab/$tag.txt
    rm -rf /tmp/fo2/run-$side/fo/cluster/broker*/data
  done
done
echo DONE >> /tmp/fo2/ab/$tag.txt
