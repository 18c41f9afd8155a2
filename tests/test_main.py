"""``python -m casty ask|tell``: what the command line gives (``--type``, ``--key``, ``--message``) is checked
before anything is sent (issue 10, findings 3 and 10).

A lone surrogate (a ``\\udcXX`` that a non-UTF-8 argv byte decodes to, or a ``\\ud800`` JSON
escape) and a JSON message nested too deep cannot travel: each exits 2 with the parser's
message naming the argument, and no connection is made (the seed below listens nowhere).
"""

from __future__ import annotations

import pytest

from casty.__main__ import main

NOWHERE = "127.0.0.1:9"  # never dialled: every case below is refused by the parser first
BASE = ["--seeds", NOWHERE, "--type", "app:counter", "--key", "k", "--message", '"Inc"']


def argv(command: str, **changes: str) -> list[str]:
    out = [command, *BASE]
    for option, value in changes.items():
        out[out.index(f"--{option}") + 1] = value
    return out


@pytest.mark.parametrize("command", ["ask", "tell"])
@pytest.mark.parametrize(
    "option, value, named",
    [
        pytest.param("key", "k\udcff", "--key: 'k\\udcff' is not valid unicode (surrogates not allowed)", id="key-surrogate"),
        pytest.param("type", "app:c\udcff", "--type: 'app:c\\udcff' is not valid unicode (surrogates not allowed)", id="type-surrogate"),
        pytest.param(
            "message", '["Add", {"text": "a\\ud800"}]', "--message: a string in it is not valid unicode (surrogates not allowed)",
            id="message-surrogate",
        ),
        pytest.param("message", "[" * 100_000 + "]" * 100_000, "--message: nested too deeply", id="message-deep"),
    ],
)
def test_cli_arguments_that_cannot_travel_exit_2(
    command: str, option: str, value: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lone surrogate in --key, --type or --message, or a 100k-deep --message: exit 2 naming the argument, nothing sent."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv(command, **{option: value}))
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err
