#!/usr/bin/env bash
# .ci/check_test_counts.sh JUNIT_XML BUILD_DIR: the test counts of a ctest run (ctest --output-junit),
# and a failure unless the golden-style tests really ran: every registered in-repo golden test
# (Repo/RepoGoldenCpu.*, from the fixed case list: 12 cases x 3 checks) has status "run" (a skip or
# a missing data folder does not count), so a suite that checks nothing cannot pass.
set -euo pipefail
xml=$1
build=$2
count() { grep -c "$1" "$xml" || true; }
total=$(count '<testcase ')
run=$(count '<testcase [^>]*status="run"')
skipped=$(count '<testcase [^>]*status="notrun"')
failed=$(count '<testcase [^>]*status="fail"')
registered=$(ctest --test-dir "$build" -N -R '^Repo/RepoGoldenCpu\.' | sed -n 's/^Total Tests: //p')
repo_run=$(grep '<testcase [^>]*status="run"' "$xml" | grep -c 'name="Repo/RepoGoldenCpu\.' || true)
shared_run=$(grep '<testcase [^>]*status="run"' "$xml" | grep -c 'name="SharedGoldenCpu\.' || true)
shared_skipped=$(grep '<testcase [^>]*status="notrun"' "$xml" | grep -c 'name="SharedGoldenCpu\.' || true)
echo "ctest: $total tests: $run run, $skipped skipped (GPU tests without an SM90 GPU; the shared golden check" \
     "without a copy of it), $failed failed"
echo "golden-style: $repo_run in-repo golden tests ran (of $registered registered); shared golden set:" \
     "$shared_run ran, $shared_skipped skipped"
if [ "${registered:-0}" -lt 36 ] || [ "$repo_run" -ne "$registered" ]; then
  echo "error: the in-repo golden-style tests did not all run ($repo_run of ${registered:-0}; at least 36 expected)" >&2
  exit 1
fi
