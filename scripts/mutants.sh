#!/usr/bin/env bash
# Mutation check of the GPU test suite: does test_gpu fail when one synchronisation or guard of the
# kernels is removed? Each tests/mutants/NN_name.patch removes one (its header says what, in which test
# modes it runs: "default", and "single_pass" = FLASH_KDA_TEST_SINGLE_PASS=always, and, for the few no
# test can see, "# expect: survives" with the reason; "# needs: 2 GPUs" for one that only a machine with two
# can kill: with fewer it is reported as not run, neither killed nor a survivor). tests/mutants/README.md
# has the last results.
#
#   scripts/mutants.sh check                  (here, ctest's mutants_apply) every patch applies to the tree
#       exactly: `patch -F0`, every context line as written (patch's default fuzz would let a patch whose
#       first or last context lines went stale apply, and change code its author never read).
#       MUTANT_PATCH_DIR (default tests/mutants) names another folder of patches (tests/tools/mutants_check_test.sh).
#   scripts/mutants.sh build [BUILD] [DEST]   (here: no GPU needed) for each patch, the library objects
#       whose sources it touches (ninja's dependency lists) compiled again from a patched copy of src/
#       with the build's own commands, put into a copy of libflash_kda.a, and test_gpu linked against it:
#       DEST/NN_name/test_gpu (default DEST = BUILD/mutants). A patch that no longer applies fails the build.
#       MUTANTS="NN ..." limits it to some patches.
#   scripts/mutants.sh host [BUILD]           (here, no GPU, no patch files) the input checks: for each
#       `return make_error(` of HOST_FILES (default src/api/validate.cpp, validate_cp.cpp,
#       validate_decode.cpp, memory_rules.cpp, decode_check.cpp, api.cpp, api_cp.cpp) a mutant whose
#       check reports nothing (`(void)make_error(`: the call goes on as if the input were valid), its
#       object compiled with the build's command, and every host test binary (but test_random_matrix_cpu and
#       test_decode_random_cpu, whose inputs are all valid) relinked and run until one fails. Prints one line per mutant (killed by which binary, or SURVIVED) and the counts; exit
#       status: the survivors not listed in tests/mutants/host_survivors.txt (lines "FILE|TEXT": a
#       survivor of FILE whose mutated line or the line after it contains TEXT, each with the reason it
#       is left). CI runs it.
#   scripts/mutants.sh run [BUILD] [DEST]     (GPU) every mutant's test_gpu in each of its modes, and the
#       control (BUILD/tests/gpu/test_gpu, unpatched) in each mode beside them, MUTANT_JOBS at a time
#       (default 4; MUTANT_TIMEOUT s each, default 300, a timeout counts as killed: a hang is a failure);
#       a mutant's run stops at its first failed test (--gtest_fail_fast), a survivor runs every test.
#       Prints one line per run: killed (the first failed tests named), survived, or the control's result.
#       Exit status: the number of failed controls plus unexpected survivors (0: the suite killed every
#       mutant it is expected to kill, and the unpatched build passed in every mode).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
BUILD=${2:-$ROOT/build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
DEST=${3:-$BUILD/mutants}
case "$DEST" in /*) ;; *) DEST=$ROOT/$DEST ;; esac
PATCH_DIR=${MUTANT_PATCH_DIR:-$ROOT/tests/mutants}
PATCHES=$(ls "$PATCH_DIR"/*.patch 2>/dev/null)
if [ -n "${MUTANTS:-}" ]; then
  sel=""
  for n in $MUTANTS; do sel="$sel $(ls "$PATCH_DIR"/${n}_*.patch)"; done
  PATCHES=$sel
fi

# The library's include roots (every root its sources include from), copied into TMP.
copy_roots() { cp -r "$ROOT/src" "$ROOT/include" "$ROOT/reference" "$1/"; }
# PATCH applied in TMP (a copy_roots copy) with no fuzz (-F0): a context line that no longer matches the
# tree makes the patch stale. Extra arguments go to patch (--dry-run).
apply_exact() {  # apply_exact TMP PATCH [ARGS...]
  local tmp=$1 p=$2
  shift 2
  patch -s -F0 "$@" -d "$tmp" -p1 < "$p"
}

# The build's compile command for library object OBJ, writing OUT from source SRC; with INCLUDE_ROOT,
# the tree's include roots replaced by that copy's (build_one's patched src/).
object_command() {  # object_command OBJ OUT SRC [INCLUDE_ROOT]
  local c
  c=$(ninja -C "$BUILD" -t commands libflash_kda.a | grep -E -- " -o $1( |\$)" | grep -F -- " -c " | head -1)
  [ -n "$c" ] || return 1
  c=$(echo "$c" | sed -E "s# -MD -MT [^ ]+ -MF [^ ]+##; s# -o $1( |\$)# -o $2\1#; s# -c [^ ]+# -c $3#")
  if [ -n "${4:-}" ]; then c=$(echo "$c" | sed "s#-I$ROOT/include#-I$4/include#; s#-I$ROOT #-I$4 #"); fi
  echo "$c"
}

# The build's link command for executable TARGET, writing OUT and linking LIB in libflash_kda.a's place.
link_command() {  # link_command TARGET OUT LIB
  ninja -C "$BUILD" -t commands "$1" | tail -1 | sed "s/ && cd .*//; s/^: && //; s# -o $1 # -o $2 #; s# libflash_kda.a # $3 #"
}

build_one() {  # build_one PATCH
  local patch=$1 name tmp objs obj cmd_line member
  name=$(basename "$patch" .patch)
  tmp=$(mktemp -d /tmp/flash_kda_mutant.XXXX)
  copy_roots "$tmp"
  if ! apply_exact "$tmp" "$patch"; then echo "$name: the patch does not apply exactly (stale)"; rm -rf "$tmp"; return 1; fi
  local changed
  changed=$(grep '^+++ b/' "$patch" | sed 's|^+++ b/||; s|\t.*||')
  objs=""
  for obj in $(ninja -C "$BUILD" -t targets all | grep -o '^CMakeFiles/flash_kda.dir/[^:]*\.o'); do
    for f in $changed; do
      if ninja -C "$BUILD" -t deps "$obj" | grep -qx "    $ROOT/$f"; then objs="$objs $obj"; break; fi
    done
  done
  [ -n "$objs" ] || { echo "$name: no library object includes $changed"; rm -rf "$tmp"; return 1; }
  cp "$BUILD/libflash_kda.a" "$tmp/libflash_kda.a"
  for obj in $objs; do
    member=$(basename "$obj")
    local src=${obj#CMakeFiles/flash_kda.dir/}
    cmd_line=$(object_command "$obj" "$tmp/$member" "$tmp/${src%.o}" "$tmp") ||
      { echo "$name: no compile command for $obj"; rm -rf "$tmp"; return 1; }
    (cd "$BUILD" && eval "$cmd_line") > "$tmp/compile.log" 2>&1 || { echo "$name: compile failed"; cat "$tmp/compile.log"; rm -rf "$tmp"; return 1; }
    (cd "$tmp" && ar r libflash_kda.a "$member" 2>/dev/null)
  done
  local link
  mkdir -p "$DEST/$name"
  link=$(link_command tests/gpu/test_gpu "$DEST/$name/test_gpu" "$tmp/libflash_kda.a")
  (cd "$BUILD" && eval "$link") > "$tmp/link.log" 2>&1 || { echo "$name: link failed"; cat "$tmp/link.log"; rm -rf "$tmp"; return 1; }
  sed -n 's/^# modes: //p' "$patch" > "$DEST/$name/modes"
  sed -n 's/^# what: //p' "$patch" > "$DEST/$name/what"
  sed -n 's/^# expect: //p' "$patch" > "$DEST/$name/expect"
  sed -n 's/^# needs: //p' "$patch" > "$DEST/$name/needs"
  echo "$name: built ($(echo $objs | wc -w) object(s) recompiled)"
  rm -rf "$tmp"
}

run_one() {  # run_one LABEL BINARY MODE LOGDIR
  local label=$1 bin=$2 mode=$3 logd=$4 log rc env=() t0=$SECONDS first
  log=$logd/$label.$mode.log
  [ "$mode" = single_pass ] && env=(FLASH_KDA_TEST_SINGLE_PASS=always)
  local ff=--gtest_fail_fast
  [ "$label" = control ] && ff=
  # "needs: N GPUs": not run on a machine with fewer (its test skips there, so a pass would mean nothing).
  local needs gpus
  needs=$(sed -n 's/^\([0-9][0-9]*\) GPUs.*/\1/p' "$(dirname "$bin")/needs" 2>/dev/null)
  if [ "$label" != control ] && [ -n "$needs" ]; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')  # (nvidia-smi lists them all: CUDA_VISIBLE_DEVICES too)
    if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
      local visible
      visible=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
      [ "$visible" -lt "$gpus" ] && gpus=$visible
    fi
    if [ "$gpus" -lt "$needs" ]; then
      printf '%-32s %-12s not run: needs %d GPUs, found %d\n' "$label" "$mode" "$needs" "$gpus"
      return
    fi
  fi
  env "${env[@]}" timeout "${MUTANT_TIMEOUT:-300}" "$bin" --gtest_brief=1 $ff > "$log" 2>&1
  rc=$?
  first=$(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | grep -v ' tests\?, listed' | head -3 | sed 's/^\[  FAILED  \] //; s/ (.*//' | tr '\n' ' ')
  if [ "$label" = control ]; then
    printf '%-32s %-12s %s (rc %d, %d s) %s\n' "$label" "$mode" "$([ $rc -eq 0 ] && echo pass || echo FAIL)" $rc $((SECONDS - t0)) "$first"
  elif [ $rc -eq 0 ]; then
    if grep -q '^survives' "$(dirname "$bin")/expect" 2>/dev/null; then
      printf '%-32s %-12s survived, as expected (%d s): %s\n' "$label" "$mode" $((SECONDS - t0)) "$(cat "$(dirname "$bin")/expect")"
    else
      printf '%-32s %-12s SURVIVED (%d s)\n' "$label" "$mode" $((SECONDS - t0))
    fi
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    printf '%-32s %-12s killed: timeout (hang) after %d s %s\n' "$label" "$mode" $((SECONDS - t0)) "$first"
  else
    printf '%-32s %-12s killed (rc %d, %d s): %s\n' "$label" "$mode" $rc $((SECONDS - t0)) "$first"
  fi
}
export -f run_one

host_mutants() {
  local files=${HOST_FILES:-"src/api/validate.cpp src/api/validate_cp.cpp src/api/validate_decode.cpp src/api/memory_rules.cpp src/api/decode_check.cpp src/api/api.cpp src/api/api_cp.cpp"}
  local tmp f n i line obj member link t killed survived=0 expected=0 total=0 ok text known
  tmp=$(mktemp -d /tmp/flash_kda_host_mutant.XXXX)
  local tests
  # (Not test_random_matrix_cpu nor test_decode_random_cpu: their ~20 s each of random configurations are
  # valid inputs only, which no removed refusal can change, and they would run in full before
  # test_validation or test_decode_validation for most mutants.)
  tests=$(ninja -C "$BUILD" -t targets all | grep -oE '^tests/test_[a-z_0-9]+:' | tr -d ':' | sort -u |
    grep -vx -e 'tests/test_random_matrix_cpu' -e 'tests/test_decode_random_cpu')
  for f in $files; do
    obj=CMakeFiles/flash_kda.dir/$f.o
    member=$(basename "$obj")
    object_command "$obj" /dev/null "$ROOT/$f" > /dev/null || { echo "$f: no compile command"; continue; }
    n=$(grep -c 'return make_error(' "$ROOT/$f")
    for i in $(seq 1 "$n"); do
      total=$((total + 1))
      line=$(grep -n 'return make_error(' "$ROOT/$f" | sed -n "${i}p" | cut -d: -f1)
      mkdir -p "$tmp/src" && cp "$ROOT/$f" "$tmp/src/$(basename "$f")"
      sed -i "${line}s/return make_error(/(void)make_error(/" "$tmp/src/$(basename "$f")"
      local c
      c=$(object_command "$obj" "$tmp/$member" "$tmp/src/$(basename "$f")")
      if ! (cd "$BUILD" && eval "$c") > "$tmp/compile.log" 2>&1; then echo "$f:$line  not compiled (skipped)"; continue; fi
      cp "$BUILD/libflash_kda.a" "$tmp/lib.a" && (cd "$tmp" && ar r lib.a "$member" 2>/dev/null)
      killed=""
      for t in $tests; do
        link=$(link_command "$t" "$tmp/bin" "$tmp/lib.a")
        (cd "$BUILD" && eval "$link") > /dev/null 2>&1 || { killed="(link failed)"; break; }
        ok=0
        (cd "$BUILD/tests" && timeout 300 "$tmp/bin" --gtest_brief=1 --gtest_fail_fast > "$tmp/run.log" 2>&1) 2>/dev/null || ok=1
        if [ $ok -ne 0 ]; then
          killed="$(basename "$t"): $(grep -m1 -E '^\[  FAILED  \] [A-Za-z]' "$tmp/run.log" | sed 's/^\[  FAILED  \] //; s/ (.*//')"
          grep -q -E '^\[  FAILED  \] [A-Za-z]' "$tmp/run.log" || killed="$killed(a crash: no test reported)"
          break
        fi
      done
      if [ -n "$killed" ]; then echo "$f:$line  killed by $killed"
      else
        text=$(sed -n "${line},$((line + 1))p" "$ROOT/$f" | sed 's/^ *//' | tr '\n' ' ')
        known=""
        while IFS='|' read -r kf kt; do
          case "$kf" in ''|'#'*) continue ;; esac
          if [ "$kf" = "$f" ] && [[ "$text" == *"$kt"* ]]; then known=1; break; fi
        done < "$ROOT/tests/mutants/host_survivors.txt"
        if [ -n "$known" ]; then expected=$((expected + 1)); echo "$f:$line  survived, as listed: $(echo "$text" | cut -c1-160)"
        else survived=$((survived + 1)); echo "$f:$line  SURVIVED: $(echo "$text" | cut -c1-160)"; fi
      fi
    done
  done
  rm -rf "$tmp"
  echo "host mutants: $total, survived $((survived + expected)) ($expected listed in tests/mutants/host_survivors.txt, $survived not)"
  [ "$total" -gt 0 ] || { echo "no mutants made: nothing was tested"; return 1; }
  return $survived
}

case "$cmd" in
  host)
    host_mutants
    exit $? ;;
  check)
    failed=0
    tmp=$(mktemp -d /tmp/flash_kda_mutant_check.XXXX)
    copy_roots "$tmp"  # one copy: --dry-run leaves it as it is
    for p in $PATCHES; do
      if apply_exact "$tmp" "$p" --dry-run > /dev/null 2>&1; then echo "$(basename "$p"): applies"
      else echo "$(basename "$p"): does not apply exactly (stale: regenerate it against the tree)"; failed=$((failed + 1)); fi
    done
    rm -rf "$tmp"
    [ -n "$PATCHES" ] || { echo "no patches in $PATCH_DIR"; exit 1; }
    exit $failed ;;
  build)
    failed=0
    for p in $PATCHES; do build_one "$p" || failed=$((failed + 1)); done
    exit $failed ;;
  run)
    LOGD=${MUTANT_LOGS:-$(mktemp -d /tmp/flash_kda_mutant_logs.XXXX)}
    mkdir -p "$LOGD"
    jobs_file=$LOGD/jobs.txt
    : > "$jobs_file"
    for m in single_pass default; do echo "control $BUILD/tests/gpu/test_gpu $m $LOGD" >> "$jobs_file"; done
    for p in $PATCHES; do
      name=$(basename "$p" .patch)
      [ -x "$DEST/$name/test_gpu" ] || { echo "$name: not built ($DEST/$name/test_gpu)"; continue; }
      for m in $(cat "$DEST/$name/modes"); do echo "$name $DEST/$name/test_gpu $m $LOGD" >> "$jobs_file"; done
    done
    xargs -P "${MUTANT_JOBS:-4}" -L 1 bash -c 'run_one "$@"' _ < "$jobs_file" | tee "$LOGD/results.txt"
    echo "logs: $LOGD"
    bad_controls=$(grep -c '^control .* FAIL' "$LOGD/results.txt")
    survivors=$(grep -c ' SURVIVED ' "$LOGD/results.txt")
    [ "$bad_controls" -eq 0 ] || echo "$bad_controls control run(s) failed: the mutants' results mean nothing"
    not_run=$(grep -c ' not run: ' "$LOGD/results.txt")
    [ "$not_run" -eq 0 ] || echo "not run (this machine has too few GPUs for them): $not_run"
    echo "unexpected survivors: $survivors"
    exit $((bad_controls + survivors)) ;;
  *)
    sed -n '2,31p' "$0"; exit 2 ;;
esac
