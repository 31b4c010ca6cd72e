"""Configuration: the properties parser, the key table (`keys/`), BrokerConfig, dynamic configs and their docs."""
