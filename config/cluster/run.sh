#!/usr/bin/env bash
# `make run-cluster`: ZooKeeper (Debian's package, started with java directly) and three kafkad brokers on
# 127.0.0.1:9092-9094, all in the foreground; Ctrl-C (or SIGTERM) stops the brokers (controlled shutdown)
# and then ZooKeeper. Data under ./data/cluster.
set -euo pipefail
cd "$(dirname "$0")/../.."
zkjar=/usr/share/java/zookeeper.jar
if [ ! -r "$zkjar" ]; then  # Debian's zookeeper package (it starts nothing by itself)
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper
fi
mkdir -p data/cluster/zk
pids=()
stop() {
  for p in "${pids[@]:1}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]:1}"; do wait "$p" 2>/dev/null || true; done
  kill -TERM "${pids[0]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT
java -Xmx256m -cp "$zkjar:/usr/share/java/slf4j-simple.jar" \
  org.apache.zookeeper.server.quorum.QuorumPeerMain config/cluster/zoo.cfg >data/cluster/zk.log 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  [ "$(echo ruok | timeout 1 bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; cat >&3; cat <&3' 2>/dev/null)" = imok ] && break
  sleep 0.1
done
echo "ZooKeeper on 127.0.0.1:2181 (log: data/cluster/zk.log)"
for i in 1 2 3; do
  .venv/bin/kafkad --config "config/cluster/broker-$i.properties" > >(sed -u "s/^/[broker-$i] /") 2>&1 &
  pids+=($!)
done
wait
