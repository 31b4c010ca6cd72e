"""The broker config keys, one module per subsystem; kafkad.config.table joins them into KEYS."""
