#!/usr/bin/env python3
"""One JUnit report naming every test case, from a CTest run of sharded GoogleTest
executables (tests/CMakeLists.txt, warden_gtest_shards), and a summary per label.

    scripts/test-report.py BUILD_DIR CTEST_JUNIT OUT_JUNIT

CTest runs each GoogleTest executable as a few shards (scripts/gtest-shard.sh), each
writing GoogleTest's XML report; CTEST_JUNIT (`ctest --output-junit`) names the CTest
tests that ran. For every executable whose shards all ran, every case it lists
(--gtest_list_tests) must have a result in its shards' reports: a case without one (its
shard crashed or timed out before the report was written) is reported as failed under
its own name. CTest tests that are not shards (scripts, fuzz replays) are one case each.

OUT_JUNIT gets one <testcase> per case, named "Suite.Case[/Param]" as GoogleTest names
it (the name CTest gave each case when it ran one process per case), with status
"run", "fail", "skipped" or "disabled". Prints per label: cases, passed, failed, skipped,
the cases' summed time and the shards' summed wall time.

Exit status: 0 if every case has a result and none failed, 1 otherwise, 2 on bad input.
"""
import collections
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

SHARD_SCRIPT = "gtest-shard.sh"


def ctest_tests(build_dir):
    """name -> (command, labels, environment) of every test CTest knows in BUILD_DIR."""
    out = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = {}
    for test in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        env = dict(e.split("=", 1) for e in props.get("ENVIRONMENT", []))
        tests[test["name"]] = (test.get("command", []), props.get("LABELS", ["-"]), env)
    return tests


def ctest_results(junit_path):
    """name -> (status, seconds) of every test in CTest's JUnit report."""
    results = {}
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None:
            status = "fail"
        elif case.find("skipped") is not None and status != "disabled":
            status = "skipped"
        results[case.get("name")] = (status, float(case.get("time", "0") or 0))
    return results


def normalised(name):
    """A case's name as CTest knew it when it ran one process per case: GoogleTest's
    full name without the DISABLED_ prefix of a disabled suite or case."""
    suite, _, case = name.partition(".")
    strip = lambda part: part[len("DISABLED_"):] if part.startswith("DISABLED_") else part
    return f"{strip(suite)}.{strip(case)}"


def listed_cases(executable):
    """Every case the executable lists, as "Suite.Case[/Param]"."""
    out = subprocess.run([executable, "--gtest_list_tests"], check=True, capture_output=True,
                         text=True).stdout
    cases, suite = [], None
    for line in out.splitlines():
        if not line.strip() or line.startswith("Running main()"):
            continue
        if not line.startswith(" "):
            suite = line.split("#", 1)[0].strip()
        else:
            cases.append(normalised(suite + line.split("#", 1)[0].strip()))
    return cases


def shard_cases(report_path):
    """name -> (status, seconds, message) of the cases in one GoogleTest XML report."""
    cases = {}
    for case in ET.parse(report_path).getroot().iter("testcase"):
        name = normalised(f'{case.get("classname")}.{case.get("name")}')
        failure = case.find("failure")
        if failure is not None:
            status, message = "fail", failure.get("message", "")
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            skipped = case.find("skipped")
            status, message = "skipped", skipped.get("message", "") if skipped is not None else ""
        elif case.get("status") == "notrun":
            status, message = "disabled", ""
        else:
            status, message = "run", ""
        cases[name] = (status, float(case.get("time", "0") or 0), message)
    return cases


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build_dir, ctest_junit, out_junit = argv[1:]
    try:
        known = ctest_tests(build_dir)
        ran = ctest_results(ctest_junit)
    except (OSError, ET.ParseError, subprocess.CalledProcessError, ValueError) as e:
        print(f"test-report: {e}", file=sys.stderr)
        return 2

    # Group the shards that ran by executable.
    shards = collections.defaultdict(list)  # executable -> [(ctest name, report, label)]
    cases = []  # (label, name, status, seconds, message)
    wall = collections.Counter()  # label -> the CTest tests' summed seconds
    for name, (status, seconds) in ran.items():
        command, labels, env = known.get(name, ([], ["-"], {}))
        label = labels[0]
        wall[label] += seconds
        if len(command) >= 3 and os.path.basename(command[0]) == SHARD_SCRIPT:
            # A run with a filter of its own (make check's TARGET/check) is checked
            # apart from the executable's shards, for the cases it reported.
            shards[(command[2], tuple(command[3:]))].append((name, command[1], label, env))
        else:
            cases.append((label, name, status, seconds, ""))

    lost = 0
    for (executable, extra_args), runs in sorted(shards.items()):
        label = runs[0][2]
        results = {}
        missing_reports = []
        for ctest_name, report, _, _ in runs:
            if os.path.exists(report):
                results.update(shard_cases(report))
            else:
                missing_reports.append(ctest_name)
        total = int(runs[0][3].get("GTEST_TOTAL_SHARDS", "1"))
        complete = len(runs) == total and not extra_args
        expected = listed_cases(executable) if complete else sorted(results)
        for name in expected:
            if name in results:
                status, seconds, message = results.pop(name)
            else:
                lost += 1
                status, seconds = "fail", 0.0
                message = ("no result: its shard ended without a report (crashed or timed out; "
                           f"see the CTest output of {', '.join(missing_reports) or 'its shard'})")
            cases.append((label, name, status, seconds, message))
        for name, (status, seconds, message) in results.items():  # reported, not listed
            cases.append((label, name, status, seconds, message))

    # The merged JUnit report.
    root = ET.Element("testsuites")
    by_label = collections.defaultdict(list)
    for case in cases:
        by_label[case[0]].append(case)
    for label in sorted(by_label):
        suite = ET.SubElement(root, "testsuite", name=label, tests=str(len(by_label[label])))
        for _, name, status, seconds, message in by_label[label]:
            element = ET.SubElement(suite, "testcase", name=name, classname=label,
                                    time=f"{seconds:.3f}", status=status)
            if status == "fail":
                ET.SubElement(element, "failure", message=message)
            elif status == "skipped":
                ET.SubElement(element, "skipped", message=message)
    ET.ElementTree(root).write(out_junit, encoding="utf-8", xml_declaration=True)

    # The summary.
    print(f"test-report: {len(cases)} cases in {os.path.relpath(out_junit)}")
    print(f"  {'label':<12} {'cases':>6} {'passed':>7} {'failed':>7} {'skipped':>8} "
          f"{'case s':>9} {'wall s':>9}")
    failed = 0
    for label in sorted(by_label):
        rows = by_label[label]
        count = collections.Counter(r[2] for r in rows)
        failed += count["fail"]
        print(f"  {label:<12} {len(rows):>6} {count['run']:>7} {count['fail']:>7} "
              f"{count['skipped']:>8} {sum(r[3] for r in rows):>9.1f} {wall[label]:>9.1f}")
    if lost:
        print(f"test-report: {lost} cases have no result (see above)", file=sys.stderr)
    for _, name, status, _, message in cases:
        if status == "fail":
            # The first lines of GoogleTest's message: where it failed and what it saw, so a
            # CI log that keeps only its tail still says why.
            lines = [line[:300] for line in message.splitlines() if line.strip()]
            print(f"  FAILED {name}", file=sys.stderr)
            for line in lines[:8]:
                print(f"    {line}", file=sys.stderr)
            if len(lines) > 8:
                print(f"    … {len(lines) - 8} more lines in the JUnit file", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
