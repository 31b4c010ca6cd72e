#!/bin/bash
# usage: abtxn.sh TAG PAIRS RUNS [both]
here=$(cd "$(dirname "$0")" && pwd)
tag=$1; pairs=$2; runs=$3; both=$4
for i in $(seq 1 $pairs); do
  for side in base head; do
    cd /tmp/fo2/$side
    echo "== $side $i $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/fo2/ab/$tag.txt
    FO_BOTH=$both FO_WORK=/tmp/fo2/txn-$side PYTHONPATH=$PWD timeout 600 .venv/bin/python $here/txn_failover.py $runs 2>&1 | grep -E "^txn kill|^errors" >> /tmp/fo2/ab/$tag.txt
    rm -rf /tmp/fo2/txn-$side/txn-failover/cluster/broker*/data
  done
done
echo DONE >> /tmp/fo2/ab/$tag.txt
