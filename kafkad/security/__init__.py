"""TLS, SASL (PLAIN, SCRAM) and ACLs: the parts of kafkad that decide who may do what."""
