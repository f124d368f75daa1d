#!/usr/bin/python3
"""redis-py's Lock, run as a foreign client by the layout=simple interop tests.

  redis_py_lock.py PORT KEY ID LOG cycles N HOLD_MS
      takes KEY N times (waiting up to 30 s each), appending "start ID" and "end ID"
      lines to LOG around each hold of HOLD_MS milliseconds
  redis_py_lock.py PORT KEY ID LOG hold HOLD_MS
      takes KEY once, appends "held ID", holds it HOLD_MS milliseconds, appends
      "released ID" just before it releases
  redis_py_lock.py PORT KEY ID LOG try
      one non-blocking attempt: appends "got ID" (and releases) or "refused ID"

Exits 0 when done, 2 when a wait ran out.
"""
import sys
import time

import redis


def append(log, line):
    with open(log, "a") as f:
        f.write(line + "\n")


def hold(client, key, ttl_s, log, first, last, hold_ms):
    """Takes KEY (waiting up to 30 s), appends FIRST, holds it HOLD_MS, appends LAST and
    releases it. False when the wait ran out."""
    lock = client.lock(key, timeout=ttl_s, sleep=0.005, blocking_timeout=30)
    if not lock.acquire():
        return False
    append(log, first)
    time.sleep(hold_ms / 1000)
    append(log, last)
    lock.release()
    return True


def main():
    port, key, ident, log, mode = sys.argv[1:6]
    client = redis.Redis(host="127.0.0.1", port=int(port))
    if mode == "cycles":
        for _ in range(int(sys.argv[6])):
            if not hold(client, key, 10, log, "start " + ident, "end " + ident, int(sys.argv[7])):
                return 2
    elif mode == "hold":
        if not hold(client, key, 30, log, "held " + ident, "released " + ident, int(sys.argv[6])):
            return 2
    elif mode == "try":
        lock = client.lock(key, timeout=30)
        if lock.acquire(blocking=False):
            append(log, "got " + ident)
            lock.release()
        else:
            append(log, "refused " + ident)
    return 0


if __name__ == "__main__":
    sys.exit(main())
