#!/usr/bin/env bash
# Fuzzes one of viewgap's file readers with libFuzzer: TARGET norb, the
# smallNORB reader (data/norb.cpp, fuzz/norb_fuzz.cpp), or idx, the IDX reader
# (data/idx.cpp, fuzz/idx_fuzz.cpp). Builds the target with clang++-14
# (-fsanitize=fuzzer,address,undefined) into build/fuzz/, writes its seed
# corpus (valid files from the project's writer), runs a fixed number of
# mutations from a fixed seed, then replays every input in
# fuzz/regressions/TARGET/. Prints one summary line; exits non-zero on any
# finding, naming the input libFuzzer saved.
#
# Allocation bound, per input, checked by the target: the readers validate
# every dimension against the file before they allocate, so nothing one
# allocates is larger than the file allows (norb: the three files plus 1 KiB;
# idx: the file plus 1 KiB, or when gzipped deflate's 1032:1 ratio times it,
# at least zlib's 32 KiB window).
# Inputs are at most 4096 bytes (-max_len; norb's -dat fill at most 8 pairs,
# 147,456 bytes), so process-wide libFuzzer fails any single malloc over the
# target's limit (norb 1 MiB, idx 8 MiB), and the run fails if its peak RSS
# passes 1 GiB (libFuzzer's stat::peak_rss_mb, checked at the end:
# -rss_limit_mb=0, as libFuzzer's RSS-polling thread perturbs the heap and
# makes runs of the same -seed differ). The measured peak, ~400 MB, is almost
# all ASan's quarantine of freed blocks (256 MB by default), not the reader's;
# LeakSanitizer (on under libFuzzer) fails any input that leaks.
#
# Where clang++-14 or its libFuzzer runtime is missing (bash tools/deps.sh fuzz
# installs both), it says so and runs the deterministic mutation tests of
# build/release/viewgap_tests instead (they cannot replay fuzz/regressions/).
#
# Usage: bash tools/fuzz.sh TARGET [RUNS]   (100000 by default; ~20 s on 2
# cores, build included). A finding: copy the saved input into
# fuzz/regressions/TARGET/ with a name saying what it was, fix, and rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "fuzz_${target:-}: $*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { printf '%.1f' "$(echo "$(now) - $1" | bc)"; }

target=${1:-}
# Per target: its reader's sources, the mutation tests that stand in without
# libFuzzer, and the largest single allocation libFuzzer lets through.
case "$target" in
  norb) sources=(data/norb.cpp fuzz/norb_fuzz.cpp); tests='NorbFuzz.*'; malloc_limit_mb=1; libs=() ;;
  idx) sources=(data/idx.cpp fuzz/idx_fuzz.cpp); tests='IdxFuzz.*'; malloc_limit_mb=8; libs=(-lz) ;;
  *) echo "usage: bash tools/fuzz.sh norb|idx [RUNS]" >&2; exit 2 ;;
esac
runs=${2:-100000}
[[ "$runs" =~ ^[0-9]+$ ]] || die "usage: bash tools/fuzz.sh $target [RUNS] (a number of mutations)"
seed=1
rss_limit_mb=1024
out=build/fuzz
mkdir -p "$out"
t0=$(now)

# --- clang++-14 and libFuzzer, or the deterministic driver ----------------------
fallback() {
  echo "fuzz_$target: $1; running the deterministic mutation tests instead (bash tools/deps.sh fuzz installs it)"
  local bin=build/release/viewgap_tests
  [ -x "$bin" ] || die "no $bin either: build it first (bash tools/test.sh release), or install clang (bash tools/deps.sh fuzz)"
  "$bin" --gtest_filter="$tests"
  exit $?
}
command -v clang++-14 >/dev/null || fallback "clang++-14 not found"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$out/probe.cpp"
clang++-14 -fsanitize=fuzzer,address,undefined "$out/probe.cpp" -o "$out/probe" 2>/dev/null ||
  fallback "clang++-14 cannot link -fsanitize=fuzzer,address,undefined (libclang-rt-14-dev missing?)"

# --- build ---------------------------------------------------------------------
werror=()
[ "${VIEWGAP_WERROR:-OFF}" = ON ] && werror=(-Werror)
clang++-14 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c++20 -O1 -g -I. \
  -Wall -Wextra "${werror[@]}" "${sources[@]}" "${libs[@]}" -o "$out/${target}_fuzz"
t_build=$(secs "$t0")

# --- seeds, then the mutations -------------------------------------------------
# Reproducible: a fresh corpus of the same seeds and the same -seed each time,
# and none of libFuzzer's clock-driven steps that change what it mutates: no
# corpus reloads (-reload=0), no allocator purges (they move heap addresses,
# which comparisons of pointers feed into the mutations), no address
# randomisation (setarch -R; value profiles hash code addresses), no RSS
# thread (-rss_limit_mb=0; the bound is checked below), and the same
# environment (env -i: its size moves the stack, and stack addresses too are
# compared). ASAN_OPTIONS and UBSAN_OPTIONS pass through when set.
norand=(env -i PATH="$PATH")
for v in ASAN_OPTIONS UBSAN_OPTIONS; do [ -z "${!v:-}" ] || norand+=("$v=${!v}"); done
setarch "$(uname -m)" -R true 2>/dev/null && norand+=(setarch "$(uname -m)" -R)
rm -rf "$out/$target"
mkdir -p "$out/$target/artifacts"
"$out/${target}_fuzz" --write-seeds="$out/$target/seeds" >/dev/null
cp -r "$out/$target/seeds" "$out/$target/corpus"
log=$out/$target/fuzz.log
t1=$(now)
status=0
"${norand[@]}" "$out/${target}_fuzz" -runs="$runs" -seed="$seed" -reload=0 -purge_allocator_interval=-1 \
  -use_value_profile=1 -max_len=4096 -timeout=10 -malloc_limit_mb="$malloc_limit_mb" -rss_limit_mb=0 \
  -print_final_stats=1 -artifact_prefix="$out/$target/artifacts/" "$out/$target/corpus" > "$log" 2>&1 || status=$?
t_fuzz=$(secs "$t1")
if [ "$status" -ne 0 ]; then
  grep -E 'ERROR|FINDING|runtime error|SUMMARY|Test unit written' "$log" >&2 || tail -n 30 "$log" >&2
  die "FAILED after $t_fuzz s (exit $status): the input is in $out/$target/artifacts/ (log $log); add it to fuzz/regressions/$target/"
fi
rss=$(sed -nE 's/^stat::peak_rss_mb: *([0-9]+)/\1/p' "$log")
[[ "$rss" =~ ^[0-9]+$ && "$rss" -le "$rss_limit_mb" ]] ||
  die "FAILED: peak RSS ${rss:-unknown} MB, over the bound of $rss_limit_mb MB (log $log)"

# --- the regression inputs ------------------------------------------------------
mapfile -t regressions < <(find "fuzz/regressions/$target" -type f ! -name 'README*' 2>/dev/null | sort)
if [ ${#regressions[@]} -gt 0 ]; then
  # No -max_len here: libFuzzer would cut a longer regression input to it.
  "$out/${target}_fuzz" -malloc_limit_mb="$malloc_limit_mb" -rss_limit_mb="$rss_limit_mb" -timeout=10 "${regressions[@]}" > "$out/$target/regressions.log" 2>&1 ||
    { tail -n 30 "$out/$target/regressions.log" >&2; die "FAILED: a regression input fails again (log $out/$target/regressions.log)"; }
fi

# --- summary: libFuzzer's final counters ----------------------------------------
execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log")
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<< "$done_line")
ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<< "$done_line")
corp=$(sed -nE 's/.* corp: ([0-9]+)\/([0-9]+[a-zA-Z]*).*/\1 inputs (\2)/p' <<< "$done_line")
echo "fuzz_$target: ${execs:-?} executions (seed $seed), cov ${cov:-?} ft ${ft:-?}, corpus ${corp:-?}," \
     "crashes 0, ${#regressions[@]} regression inputs replayed, peak RSS $rss MB;" \
     "fuzzing $t_fuzz s, all $(secs "$t0") s (build $t_build s)"
