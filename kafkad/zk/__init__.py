"""ZooKeeper: kazoo bridged into the event loop, Kafka's znode layout and codecs, change notifications,
ZooKeeper ACLs and security, and the stores kept in znodes."""
