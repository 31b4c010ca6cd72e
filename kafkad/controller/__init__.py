"""The ZooKeeper-mode controller: event queue, context, state machines, the channel to brokers,
reassignment, topic deletion, replica placement."""
