"""CRC-32C (Castagnoli), the checksum of every record batch, from the crc32c package's C extension.

Loaded without running the package's `__init__`: that imports importlib.metadata (for its
`__version__`: email, zipfile, csv, datetime) and its argparse CLI, ~2.9 MB of an idle broker's RSS
for one function. If the extension cannot be found that way (another packaging of crc32c), the
package is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

Crc32c = Callable[..., int]  # crc32c(data, value=0) -> int, as crc32c.crc32c


def _load_extension() -> Crc32c:
    spec = importlib.util.find_spec("crc32c")  # finds the package without importing it
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(location) / f"_crc32c{suffix}"
            if path.is_file():
                ext = importlib.util.spec_from_file_location("crc32c._crc32c", path)
                if ext is None or ext.loader is None:
                    continue
                module: Any = importlib.util.module_from_spec(ext)
                ext.loader.exec_module(module)
                return cast(Crc32c, module.crc32c)
    from crc32c import crc32c as packaged

    return cast(Crc32c, packaged)


crc32c: Crc32c = _load_extension()
