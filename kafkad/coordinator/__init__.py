"""Coordinators that live on the broker leading their internal topic's partition: groups (`group/`),
transactions (`transaction/`)."""
