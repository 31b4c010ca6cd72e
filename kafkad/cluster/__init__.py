"""A broker's side of the cluster: cluster-mode wiring, the metadata image, topic ids, producer id blocks,
ZooKeeper-backed admin operations and ISR writes."""
