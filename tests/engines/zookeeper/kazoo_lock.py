"""A kazoo (python3-kazoo 2.8) lock holder for the zk:// layout=curator tests.

usage: kazoo_lock.py HOSTS PATH IDENTIFIER KIND HOLDS HOLD_MS MARKERS

  HOSTS       kazoo's connect string ("127.0.0.1:PORT", optionally "/CHROOT")
  PATH        the lock's path, e.g. /G/N
  KIND        lock:  Lock(..., extra_lock_patterns=["-lock-"]), the exclusive lock that
                     also sees Curator's (and warden's) InterProcessMutex nodes
              write: WriteLock, seeing Curator's "-lock-", "__WRIT__", "__READ__" too
              read:  ReadLock, seeing Curator's "-lock-" and "__WRIT__" writers too
  HOLDS       how many times to acquire and release; 0: acquire once and hold until
              SIGTERM, then release
  HOLD_MS     how long each hold lasts
  MARKERS     a file every hold appends "start IDENTIFIER" and "end IDENTIFIER" lines to
              (one write each, O_APPEND), so overlapping holds show as interleaved lines

Prints "waiting N", "acquired N" and "released N" on stdout (flushed) for hold N.
A fresh Lock object per hold: its parent nodes may be containers the server deleted
while they were empty, and a Lock checks its path only once.
"""
import os
import signal
import sys
import threading
import time

from kazoo.client import KazooClient

PATTERNS = {
    "lock": ["-lock-"],
    "write": ["-lock-", "__WRIT__", "__READ__"],
    "read": ["-lock-", "__WRIT__"],
}


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def mark(markers, text):
    fd = os.open(markers, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def main():
    hosts, path, identifier, kind = sys.argv[1:5]
    holds, hold_ms, markers = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=15)
    try:
        for i in range(max(holds, 1)):
            if kind == "lock":
                lock = client.Lock(path, identifier, extra_lock_patterns=PATTERNS[kind])
            elif kind == "write":
                lock = client.WriteLock(path, identifier, extra_lock_patterns=PATTERNS[kind])
            else:
                lock = client.ReadLock(path, identifier, extra_lock_patterns=PATTERNS[kind])
            say("waiting %d" % i)
            lock.acquire()
            say("acquired %d" % i)
            mark(markers, "start " + identifier)
            if holds == 0:
                while not stop.wait(0.05):
                    pass
            else:
                time.sleep(hold_ms / 1000.0)
            mark(markers, "end " + identifier)
            lock.release()
            say("released %d" % i)
    finally:
        client.stop()
        client.close()
    say("done")


if __name__ == "__main__":
    main()
