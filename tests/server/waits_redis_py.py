#!/usr/bin/python3
"""Tagged waits (WAITS, ACQUIRE ... TAG t, WITHDRAW t) spoken to a live wardend by
redis-py (Debian's python3-redis), a RESP client that knows nothing of warden.

  waits_redis_py.py PORT

Prints what differs from the protocol (docs/protocol.md, WAITS) and exits 1; exits 0 when
everything was answered as documented.
"""
import sys

import redis

failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def is_grant(reply):
    return isinstance(reply, list) and len(reply) == 3 and isinstance(reply[0], int)


def main():
    port = int(sys.argv[1])
    holder = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
    waits = redis.Connection(host="127.0.0.1", port=port, socket_timeout=10)

    held = holder.execute_command("ACQUIRE", "interop/a", "x", "60000")
    if not is_grant(held):
        print(f"the holder was not granted: {held!r}")
        return 1

    waits.send_command("WAITS")
    expect("WAITS", waits.read_response(), b"OK")
    # Queued behind the holder: answered later. Free: answered at once.
    waits.send_command("ACQUIRE", "interop/a", "x", "60000", "WAIT", "10000", "TAG", "first")
    waits.send_command("ACQUIRE", "interop/b", "x", "60000", "TAG", "second")
    second = waits.read_response()
    expect("the free lock's tag", second[0], b"second")
    expect("the free lock granted at once", is_grant(second[1]), True)

    expect("RELEASE", holder.execute_command("RELEASE", "interop/a", held[0], held[2]), 1)
    first = waits.read_response()
    expect("the waiting lock's tag", first[0], b"first")
    expect("the waiting lock granted at the release", is_grant(first[1]), True)

    # Queued again behind that grant, then withdrawn: nil, and no waiter left.
    waits.send_command("ACQUIRE", "interop/a", "x", "60000", "WAIT", "10000", "TAG", "third")
    waits.send_command("WITHDRAW", "third")
    expect("WITHDRAW's answer", waits.read_response(), [b"third", None])
    inspect = holder.execute_command("INSPECT", "interop/a")
    fields = dict(zip(inspect[0::2], inspect[1::2]))
    expect("waiters after WITHDRAW", fields.get(b"waiters"), [])

    # A request without its tag: one error, then the server closes the connection.
    waits.send_command("PING")
    expect("PING", waits.read_response(), b"PONG")
    waits.send_command("ACQUIRE", "interop/c", "x", "60000")
    try:
        refused = waits.read_response()
    except redis.ResponseError as e:
        refused = e
    expect("an untagged ACQUIRE refused", isinstance(refused, redis.ResponseError), True)
    try:
        waits.read_response()
        failures.append("the connection stayed open after an untagged request")
    except (redis.ConnectionError, OSError):
        pass

    for line in failures:
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
