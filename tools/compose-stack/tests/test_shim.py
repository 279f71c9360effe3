"""The podman shim's answers for podman before 4.6 (compose_stack.shim), without podman."""

from __future__ import annotations

from compose_stack.shim import WaitRequest, parse_wait, verdict, without_requires


def test_parses_the_waits_podman_compose_writes() -> None:
    assert parse_wait(["--condition=healthy", "a", "b"]) == WaitRequest(
        "healthy", ("a", "b"), False, 1.0)
    assert parse_wait(["--condition=running", "--ignore", "a"]) == WaitRequest(
        "running", ("a",), True, 1.0)
    assert parse_wait(["--condition", "stopped", "--interval", "250ms", "a"]) == WaitRequest(
        "stopped", ("a",), False, 0.25)


def test_leaves_other_waits_to_podman() -> None:
    assert parse_wait(["a"]) is None                               # no condition: podman's own
    assert parse_wait(["--condition=paused", "a"]) is None
    assert parse_wait(["--condition=healthy"]) is None             # no container
    assert parse_wait(["--latest", "--condition=healthy", "a"]) is None


def running() -> dict[str, object]:
    return {"Status": "running", "ExitCode": 0}


def ended(code: int) -> dict[str, object]:
    return {"Status": "exited", "ExitCode": code}


def test_healthy_needs_a_passing_check_when_there_is_one() -> None:
    assert verdict("healthy", running(), True, False, True) == "wait"
    assert verdict("healthy", running(), True, True, True) == "met"
    assert verdict("healthy", running(), False, False, True) == "met"
    # A one-shot step with its healthcheck disabled (up --wait asks for its health): done.
    assert verdict("healthy", ended(0), False, False, False) == "met"
    assert verdict("healthy", {"Status": "created", "ExitCode": 0}, True, False, True) == "wait"


def test_a_one_shot_step_is_done_when_it_ended_well() -> None:
    assert verdict("stopped", running(), False, False, False) == "wait"
    assert verdict("stopped", ended(0), False, False, False) == "met"
    # up --wait on a container without healthcheck: running, or a step that completed.
    assert verdict("running", ended(0), False, False, False) == "met"
    assert verdict("running", running(), False, False, False) == "met"


def test_a_step_that_failed_fails_the_wait_unless_it_is_restarted() -> None:
    for condition in ("healthy", "running", "stopped"):
        assert verdict(condition, ended(1), False, False, False) == "failed"
        # A service with a restart policy is coming back: keep waiting.
        assert verdict(condition, ended(1), True, False, True) == "wait"


def test_create_loses_its_requires_only() -> None:
    assert without_requires(["create", "--name=a", "--requires=b,c", "-d", "img"]) == [
        "create", "--name=a", "-d", "img"]
    assert without_requires(["create", "--requires", "b", "img"]) == ["create", "img"]


def test_a_container_that_never_started_fails_the_wait_after_a_while() -> None:
    created = {"Status": "created", "ExitCode": 0}
    assert verdict("healthy", created, True, False, True, waited_s=1) == "wait"
    assert verdict("healthy", created, True, False, True, waited_s=60) == "failed"
    assert verdict("running", created, False, False, False, waited_s=60) == "failed"
