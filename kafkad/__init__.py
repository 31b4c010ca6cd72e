"""kafkad: a Kafka broker for edge appliances."""

__version__ = "0.1.0"
