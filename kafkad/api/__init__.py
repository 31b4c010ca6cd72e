"""The API room: one module per Kafka API, each registering its handler in kafkad.network.registry.

`load_handlers()` imports every module of this package, so a new API is one new file; ApiVersions is derived
from the registry, never from a second list.
"""

from __future__ import annotations

import importlib
import pkgutil

from kafkad.network.registry import REGISTRY, HandlerRegistry


def load_handlers() -> HandlerRegistry:
    """Import every handler module in this package, filling REGISTRY."""
    for mod in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        importlib.import_module(mod.name)
    return REGISTRY
