"""kafkad's command line: the plain service form is parsed without argparse (issue 21 item 3), and every
command line parses to what argparse makes of it."""

from __future__ import annotations

import pytest

from kafkad.service.main import _parse_args, _parse_with_argparse

CASES = [
    [],
    ["--config", "a.properties"],
    ["-c", "a", "--override", "x=1", "--override=y=2", "--log-level=DEBUG"],
    ["--config=a"],
    ["--config="],
    ["--override", "k=v"],
    ["--log-level", "warning", "-c", "b", "--config", "c"],
    ["--override=a=-1"],
    ["--version"],
    ["--check-config", "-c", "a"],
    ["--config-reference"],
    ["--log", "DEBUG", "-c", "a"],  # an abbreviation: argparse's
    ["-ca"],
    ["--", "-c"],
]

ERRORS = [["--conf", "a"], ["--config", "-x"], ["-c"], ["--override"], ["--nope"], ["a"]]


@pytest.mark.parametrize("argv", CASES, ids=repr)
def test_same_as_argparse(argv: list[str]) -> None:
    try:
        want = vars(_parse_with_argparse(argv))
    except SystemExit as e:
        with pytest.raises(SystemExit) as got:
            _parse_args(argv)
        assert got.value.code == e.code
        return
    assert vars(_parse_args(argv)) == want


@pytest.mark.parametrize("argv", ERRORS, ids=repr)
def test_errors_are_argparse_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as got:
        _parse_args(argv)
    assert got.value.code == 2
    assert "usage: kafkad" in capsys.readouterr().err
