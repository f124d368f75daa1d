#!/usr/bin/env python3
"""Fails when a test was skipped that tests/allowed-skips.txt does not allow.

A skipped test counts as passed, so a regression that turns tests into skips (an engine
that stops reporting a capability, a probe that gives up) would otherwise go unseen.

    scripts/check-skips.py JUNIT_XML [ALLOW_LIST]

JUNIT_XML is what `ctest --output-junit FILE` wrote. ALLOW_LIST (default
tests/allowed-skips.txt next to this script's parent) holds one CTest test name or
fnmatch glob per line; '#' starts a comment, blank lines are ignored. Exit status: 0 if
every skipped test is allowed, 1 if some are not (they are named), 2 on bad input.
"""
import fnmatch
import os
import sys
import xml.etree.ElementTree as ET


def read_allow_list(path):
    patterns = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            pattern = line.split("#", 1)[0].strip()
            if pattern:
                patterns.append(pattern)
    return patterns


def skipped_tests(junit_path):
    """CTest marks a test skipped (status="skipped", or a <skipped> child) when its
    output matched SKIP_REGULAR_EXPRESSION, which gtest_discover_tests sets to
    GoogleTest's "[  SKIPPED ]"."""
    root = ET.parse(junit_path).getroot()
    names = []
    for case in root.iter("testcase"):
        if case.get("status") == "skipped" or case.find("skipped") is not None:
            # A parameterised test's name carries "  # GetParam() = ..." after it.
            names.append(case.get("name", "?").split("  # ", 1)[0])
    return sorted(names)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    junit = argv[1]
    allow = argv[2] if len(argv) == 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "allowed-skips.txt")
    try:
        patterns = read_allow_list(allow)
        skipped = skipped_tests(junit)
    except (OSError, ET.ParseError) as e:
        print(f"check-skips: {e}", file=sys.stderr)
        return 2
    unexpected = [n for n in skipped if not any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    print(f"check-skips: {len(skipped)} skipped, {len(skipped) - len(unexpected)} allowed "
          f"by {os.path.relpath(allow)}")
    if unexpected:
        print(f"check-skips: {len(unexpected)} skipped tests are not in the allow-list:",
              file=sys.stderr)
        for name in unexpected:
            print(f"  {name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
