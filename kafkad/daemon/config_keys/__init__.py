"""The broker config keys, one module per subsystem; kafkad.daemon.config_table joins them into KEYS."""
