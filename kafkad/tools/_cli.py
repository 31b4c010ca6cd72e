"""Argparse pieces and the error boundary shared by the admin tools.

Every tool's `main(argv)` builds its parser with `tool_parser`, then runs its body through `run`, which turns a
ToolError into one line on stderr plus a non-zero exit status (never a traceback), Ctrl-C into status 130
and a closed stdout pipe (`... | head`) into a quiet exit.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, NoReturn

from kafkad.tools.client import ToolError

if TYPE_CHECKING:
    from kafkad.tools.client_security import ClientSecurity


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; keep that, but name the tool and hint at --help like Kafka."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def tool_parser(prog: str, description: str, *, broker_list_alias: bool = True) -> argparse.ArgumentParser:
    """`broker_list_alias=False` for a tool whose own --broker-list means something else (reassignment)."""
    parser = _Parser(prog=prog, description=description)
    parser.add_argument(
        "--bootstrap-server",
        # the console producer's older name, still in operators' notes
        *(("--broker-list",) if broker_list_alias else ()),
        dest="bootstrap_server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="the broker(s) to connect to",
    )
    parser.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        default=None,
        help="find the brokers through ZooKeeper (cluster mode) instead of --bootstrap-server",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties file: security.protocol, ssl.truststore.location, sasl.mechanism, sasl.jaas.config",
    )
    parser.add_argument("--client-id", default="kafkad-tools", help=argparse.SUPPRESS)
    parser.add_argument("--verbose", "-v", action="store_true", help="log protocol traffic at DEBUG")
    return parser


def bootstrap_of(args: argparse.Namespace) -> str:
    """The --bootstrap-server value, or a ToolError explaining what to pass."""
    if args.zookeeper is not None and not args.bootstrap_server:
        from kafkad.tools.zk_bootstrap import bootstrap_from_zookeeper

        return bootstrap_from_zookeeper(args.zookeeper)
    value: str | None = args.bootstrap_server or os.environ.get("KAFKAD_BOOTSTRAP_SERVER")
    if not value:
        raise ToolError('Missing required argument "[bootstrap-server]"')
    return value


def security_of(args: argparse.Namespace) -> ClientSecurity | None:
    """TLS/SASL settings from --command-config (a Kafka client properties file), or None."""
    if not args.command_config:
        return None
    from kafkad.config.properties import PropertiesSyntaxError
    from kafkad.config.properties import parse_properties as parse_file
    from kafkad.tools.client_security import ClientSecurity

    try:
        with open(args.command_config, encoding="utf-8") as f:
            entries = parse_file(f.read())
    except OSError as e:
        raise ToolError(f"cannot read --command-config {args.command_config}: {e.strerror or e}") from None
    except PropertiesSyntaxError as e:
        raise ToolError(f"{args.command_config}:{e.line}: {e.message}") from None
    return ClientSecurity.from_properties({e.key: e.value for e in entries})


def parse_key_values(items: Iterable[str], what: str) -> dict[str, str]:
    """["k=v", "k2=v2,k3=v3"] -> dict; values may contain '=' (split at the first one)."""
    out: dict[str, str] = {}
    for item in items:
        for part in split_commas(item):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ToolError(f"Invalid {what} '{part}': expected key=value")
            out[key] = value.strip()
    return out


def split_commas(text: str) -> list[str]:
    """Kafka's config lists: split on commas, except inside [..] (list values as in k=[a,b])."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip().replace("[", "").replace("]", "") for p in parts if p.strip()]


def parse_properties(items: Iterable[str]) -> dict[str, str]:
    """--property k=v (one pair per flag; values may contain commas)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid property '{item}': expected key=value")
        out[key.strip()] = value
    return out


def prop_bool(props: dict[str, str], key: str, default: bool = False) -> bool:
    value = props.get(key)
    return default if value is None else value.strip().lower() == "true"


def unescape(text: str) -> str:
    """Separators given on a shell line as '\\t' or '\\n' mean the control characters, as in Kafka."""
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


def run(body: Callable[[], int], error_prefix: str = "Error") -> int:
    """Run a tool body at the error boundary; returns the exit status."""
    try:
        return body()
    except ToolError as e:
        print(f"{error_prefix}: {e.message}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stderr,
    )


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    setup_logging(bool(getattr(args, "verbose", False)))
    return args
