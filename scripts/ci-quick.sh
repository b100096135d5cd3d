#!/usr/bin/env bash
# ci-quick.sh [BASE]: one case of every stage of .ci/run, in minutes, before a submission
# (a change whose CI fails does not land). From the repository root:
#   1. the clang build with -Werror (build-fuzz: clang, CUDA and MPI off, the fuzz targets);
#   2. the sanitized build (build-asan) and, under ASan and UBSan, the tests whose files
#      changed since BASE (default HEAD~1; tests/test_NAME.c runs NAME or its cases
#      NAME.CASE, a tests/ script the ctest tests that call it) with the C unit tests of
#      the simulation beside them;
#   3. one libFuzzer target (the experiment parser) for 10 s from its seed corpus;
#   4. each sanitized test's measured time against ctest's default limit (1500 s) and
#      .ci/run's budget: a test past a third of the limit is named.
# Prints one line a stage and exits non-zero on the first that fails.
set -uo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
t0=$SECONDS
stage() { echo "ci-quick: $1 ($((SECONDS - t0)) s)"; }
fail() { echo "ci-quick: FAILED: $1" >&2; exit 1; }

if command -v clang >/dev/null; then
  CC=clang scripts/build.sh build-fuzz -DPKV_CUDA=OFF -DPKV_MPI=OFF -DPKV_FUZZ=ON \
    > /tmp/ci-quick-clang.log 2>&1 || { tail -20 /tmp/ci-quick-clang.log; fail "the clang build"; }
  stage "clang build with -Werror: ok"
else
  stage "clang is not installed: the clang build and the fuzz target left to CI"
fi

scripts/build.sh build-asan -DPKV_CUDA=OFF -DPKV_SANITIZE=ON -DPKV_MPI=OFF \
  -DCMAKE_BUILD_TYPE=Debug > /tmp/ci-quick-asan.log 2>&1 ||
  { tail -20 /tmp/ci-quick-asan.log; fail "the sanitized build"; }
names="sim|sched|fleet|workload|summary"
for f in $(git diff --name-only "$base" -- tests/ 2> /dev/null; git ls-files --others --exclude-standard tests/); do
  b=$(basename "$f")
  case $b in
  test_*.c) n=${b#test_} names="$names|${n%.c}" ;;
  *.py | *.sh)
    for t in $(grep -B1 -h "$b" tests/CMakeLists.txt | grep -o 'NAME [a-z0-9_]*' | cut -d' ' -f2); do
      names="$names|$t"
    done
    ;;
  esac
done
stage "sanitized build: ok; running ^($names)\$"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest -j2 -LE long -R "^($names)(\\..*)?\$" \
  > /tmp/ci-quick-ctest.log 2>&1) || { grep -E "Failed|\*\*\*" /tmp/ci-quick-ctest.log; fail "the sanitized tests"; }
stage "sanitized tests: $(grep -o '[0-9]*% tests passed.*' /tmp/ci-quick-ctest.log | head -1)"

if [ -x build-fuzz/tests/fuzz_experiment ]; then
  corpus=$(mktemp -d)
  build-fuzz/tests/fuzz_experiment -max_total_time=10 "$corpus" tests/fuzz/corpus/experiment \
    > /tmp/ci-quick-fuzz.log 2>&1 || { tail -30 /tmp/ci-quick-fuzz.log; rm -rf "$corpus"; fail "fuzz_experiment"; }
  rm -rf "$corpus"
  stage "fuzz_experiment, 10 s: $(grep -o 'Done [0-9]* runs' /tmp/ci-quick-fuzz.log | head -1)"
fi

slow=$(awk '/Test +#/ { for (i = 1; i <= NF; i++) if ($i == "sec") print $(i - 1), $4 }' \
  /tmp/ci-quick-ctest.log | awk '$1 > 500 { print $2 " " $1 " s" }')
[ -z "$slow" ] || fail "past a third of ctest's 1500 s under the sanitizers: $slow"
stage "every sanitized test under 500 s: ok"
