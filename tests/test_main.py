"""``python -m casty ask|tell``: what the command line gives (``--type``, ``--key``, ``--message``) is checked
before anything is sent (issue 10, findings 3 and 10); so are the operator's other flags (durations, counts,
seed lists, cluster names, fact kinds, the secret file; the hostile-operator findings).

A lone surrogate (a ``\\udcXX`` that a non-UTF-8 argv byte decodes to, or a ``\\ud800`` JSON
escape) and a JSON message nested too deep cannot travel: each exits 2 with the parser's
message naming the argument, and no connection is made (the seed below listens nowhere).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

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


# --- the operator's flags: bad durations, counts, names, kinds, files exit 2 naming the flag (H8) -----------------

LONG_CLUSTER = "c" * 201  # one byte over MAX_CLUSTER_NAME


@pytest.mark.parametrize(
    "args, named",
    [
        pytest.param(["ask", *BASE, "--timeout", "3601"], "argument --timeout: must be at most 3600 seconds", id="ask-timeout-over-max"),
        pytest.param(["members", "--seeds", NOWHERE, "--timeout", "1e20"], "argument --timeout: must be a positive, finite", id="members-timeout-huge"),
        pytest.param(["placement", "--seeds", NOWHERE, "--type", "a:b", "--key", "k", "--timeout", "nan"], "argument --timeout: must be a positive", id="placement-timeout-nan"),
        pytest.param(["members", "--seeds", ","], "argument --seeds: name at least one seed HOST:PORT, got ','", id="members-no-seed"),
        pytest.param(["members", "--seeds", NOWHERE, "--cluster", LONG_CLUSTER], "argument --cluster: the cluster name is 201 bytes, over the 200-byte limit", id="client-cluster-long"),
        pytest.param(["tell", *BASE, "--cluster", "a\tb"], "argument --cluster: the cluster name must be printable text", id="client-cluster-control"),
        pytest.param(["node", "--bind", NOWHERE, "--cluster", LONG_CLUSTER], "argument --cluster: the cluster name is 201 bytes, over the 200-byte limit", id="node-cluster-long"),
        pytest.param(["node", "--bind", NOWHERE, "--heartbeat", "1e20"], "argument --heartbeat: must be a positive, finite number of seconds", id="heartbeat-past-timedelta-max"),
        pytest.param(["node", "--bind", NOWHERE, "--leave-timeout", "1e20"], "argument --leave-timeout: must be a positive, finite", id="leave-timeout-huge"),
        pytest.param(["node", "--bind", NOWHERE, "--idle-timeout", "1e300"], "argument --idle-timeout: must be a positive, finite", id="idle-timeout-huge"),
        pytest.param(["node", "--bind", NOWHERE, "--max-connections", "0"], "argument --max-connections: max_connections must be an int of at least 1, got 0", id="max-connections-0"),
        pytest.param(["node", "--bind", NOWHERE, "--max-handshakes", "-3"], "argument --max-handshakes: max_handshakes must be an int of at least 1, got -3", id="max-handshakes-negative"),
        pytest.param(["node", "--bind", NOWHERE, "--max-buffered", "1000"], "argument --max-buffered: max_buffered (1000) must hold one partial frame of MAX_FRAME (4194304) bytes", id="max-buffered-under-a-frame"),
        pytest.param(["node", "--bind", NOWHERE, "--facts", "epoch.acquired,schedule.fird,x"], "argument --facts: unknown event kinds 'schedule.fird', 'x'; known: all, activation.ended,", id="facts-unknown"),
    ],
)
def test_bad_operator_flags_exit_2_naming_the_flag(args: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each bad duration, count, seed list, cluster name or fact kind: exit 2, the subcommand's usage, the flag named; no traceback."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    err = capsys.readouterr().err
    assert (exit_info.value.code, named in err, "Traceback" in err) == (2, True, False), err
    assert f"python -m casty {args[0]}: error: " in err


def test_every_default_fact_kind_and_all_are_known_kinds() -> None:
    """The default --facts, the frame facts and 'all' pass the kind check (it refuses only what no event is)."""
    from casty.__main__ import _facts, event_kinds
    from casty.cluster.frames import FRAME_FACTS
    from casty.cluster.node import FACTS

    assert FACTS | FRAME_FACTS <= event_kinds()
    assert _facts(",".join(sorted(FACTS | FRAME_FACTS)) + ",all") == FACTS | FRAME_FACTS | {"all"}


def test_a_secret_file_over_the_limit_is_refused_before_anything_is_dialled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --secret-file of MAX_SECRET_FILE + 1 bytes exits 2 naming --secret-file and the limit (it was read whole and used)."""
    from casty.__main__ import MAX_SECRET_FILE

    big = tmp_path / "secret"
    big.write_bytes(b"s" * (MAX_SECRET_FILE + 1))
    with pytest.raises(SystemExit) as exit_info:
        main(["members", "--seeds", NOWHERE, "--timeout", "0.5", "--secret-file", str(big)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"members: error: --secret-file: the secret file '{big}' is over the 65536-byte limit of a secret" in err


def test_a_secret_file_that_never_ends_or_blocks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--secret-file /dev/zero or a FIFO exits 2 at once naming it (read forever, memory growing / blocked at open)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, why in (("/dev/zero", "is over the 65536-byte limit of a secret"), (str(fifo), "is a pipe or socket, not a file")):
        with pytest.raises(SystemExit) as exit_info:
            main(["members", "--seeds", NOWHERE, "--secret-file", path])
        assert exit_info.value.code == 2
        assert f"--secret-file: the secret file '{path}' {why}" in capsys.readouterr().err


def test_a_node_that_cannot_listen_leaves_no_trace_file_behind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``node --trace NEW`` on a port in use exits 1 and removes the empty NEW it made; an existing trace file is kept."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
        old.write_text("")
        for trace in (new, old):
            code = main(["node", "--bind", f"127.0.0.1:{port}", "--trace", str(trace)])
            assert code == 1 and "cannot listen on" in capsys.readouterr().err
        assert (new.exists(), old.exists()) == (False, True)
    finally:
        taken.close()
