#!/usr/bin/env bash
# The whole of viewgap on aarch64, from an x86-64 machine: cross-builds the
# library, the `viewgap` executable and `viewgap_tests` with Debian's cross
# toolchain against Debian's arm64 packages, then runs the test suite (ctest,
# each test under qemu-aarch64) and `viewgap run --n-epochs 1` under qemu.
#
# The arm64 packages (tools/deps.sh --list arm64) are resolved and downloaded by
# apt from the machine's configured Debian mirror into a private apt state and
# unpacked into a sysroot, build/aarch64-sysroot, which is reused while the
# package list and the apt sources are unchanged (and for a week at most). Not
# multiarch: libdnnl-dev:amd64 and :arm64 cannot be co-installed (see
# tools/aarch64-toolchain.cmake). The benchmarks are not built for aarch64.
#
# Usage: bash tools/cross_arm64.sh   (builds in build/aarch64; VIEWGAP_WERROR=ON
# makes warnings errors, as in CI). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "cross_arm64: $*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { printf '%.0f' "$(echo "$(now) - $1" | bc)"; }

bash tools/deps.sh cross

# --- the arm64 sysroot -------------------------------------------------------
sys=$PWD/build/aarch64-sysroot
mapfile -t pkgs < <(bash tools/deps.sh --list arm64)
key=$( { printf '%s\n' "${pkgs[@]}"; cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
         /etc/apt/sources.list.d/*.list 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)
stamp=$sys/.viewgap-sysroot
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ] && [ -z "$(find "$stamp" -mtime +7)" ]; then
  echo "cross_arm64: reusing $sys"
else
  t0=$(now)
  echo "cross_arm64: unpacking ${pkgs[*]} (arm64) into $sys"
  new=$sys.new
  rm -rf "$new"
  mkdir -p "$new"/var/lib/apt/lists/partial "$new"/var/cache/apt/archives/partial "$new"/var/lib/dpkg \
           "$new"/etc/apt/apt.conf.d "$new"/etc/apt/preferences.d
  : > "$new"/var/lib/dpkg/status
  # apt with the host's sources and keys, but its own (empty) package state,
  # for arm64 only: it downloads exactly the Depends closure of the list.
  apt=(apt-get -qq -o Dir="$new" -o Dir::State::status="$new/var/lib/dpkg/status"
       -o Dir::Etc::SourceList=/etc/apt/sources.list -o Dir::Etc::SourceParts=/etc/apt/sources.list.d
       -o Dir::Etc::Trusted=/etc/apt/trusted.gpg -o Dir::Etc::TrustedParts=/etc/apt/trusted.gpg.d
       -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Debug::NoLocking=1)
  "${apt[@]}" update || die "apt-get update for arm64 failed"
  "${apt[@]}" install -y --download-only --no-install-recommends "${pkgs[@]}" >/dev/null \
    || die "downloading the arm64 packages failed"
  # Unpack each package and record which package each file came from
  # (tools/check_deps.sh --sysroot reads the manifest).
  manifest=$new/var/lib/viewgap-sysroot.files
  mkdir -p "$(dirname "$manifest")"
  for deb in "$new"/var/cache/apt/archives/*.deb; do
    p=$(dpkg-deb -f "$deb" Package)
    dpkg-deb -x "$deb" "$new"
    dpkg-deb -c "$deb" | awk -v p="$p" '{ f = $6; sub(/^\./, "", f); if (f != "/" && $1 !~ /^d/) print p ": " f }' >> "$manifest"
  done
  rm -f "$new"/var/cache/apt/archives/*.deb
  rm -rf "$sys"
  mv "$new" "$sys"
  echo "$key" > "$stamp"
  echo "cross_arm64: sysroot ready in $(secs "$t0") s"
fi

# --- build ---------------------------------------------------------------------
t0=$(now)
cmake --preset aarch64 -DVIEWGAP_ARM64_SYSROOT="$sys" -DVIEWGAP_WERROR="${VIEWGAP_WERROR:-OFF}" >/dev/null
cmake --build --preset aarch64
echo "cross_arm64: cross build took $(secs "$t0") s"

# --- tests under qemu ------------------------------------------------------------
# Left out, with the reason (the rest of the suite runs):
excluded=(
  # Too slow under emulation (native seconds, here minutes: many full trainings).
  "Cli.OutcomesAgreeAsDistributionsAcrossKernelIsasAndThreadCounts"  # > 10 min under qemu
  "Sweep.SameResultsForOneOrTwoJobsAndDirectoryIsProtected"          # ~190 s
  "Sweep.ResumeAfterAKillFinishesTheSameTables"                      # ~190 s
  "Training.SameSeedAndThreadsGiveIdenticalResults"                  # ~160 s
  "Cli.ThreadsChangeNoResult"                                        # ~340 s
  "NorbRun.PaperAzimuthSplitTrainsBothModelsAboveChance"             # ~570 s
  "NorbRun.ThreadsChangeNoResult"                                    # ~100 s
  "NorbRun.SweepOverSeedsGivesTheSplitsTables"                       # ~60 s
  "Sweep.ShardsMergeIntoTheTablesOfTheUnshardedSweep"                # ~230 s
  # The registry-wide repeat of the per-model gradient checks, which do run
  # here (6 s native, minutes emulated; cnn-paper's 4.2M-weight layer).
  "GradientCheck.EveryRegisteredModelMatchesFiniteDifferences"
  # Registry-wide: five training steps of every model at batch 32, convcaps's
  # (1.4 s native each) included; 45 s native, over 10 min emulated.
  "Training.AStepAllocatesNothingOnceWarm"
  "Training.APreparedModelsFirstStepAllocatesNothing"
  # The convolutional routing's scalar reference against finite differences
  # (227 s and 58 s emulated); arch-independent code, checked natively. Its
  # NEON variant's own finite-difference test runs here.
  "ConvEmRouting.FullBackwardMatchesFiniteDifferencesThrough1To3Iterations"
  "ConvEmRouting.StopGradientBackwardMatchesFiniteDifferencesOfTheFrozenMStep"
  # Fourteen one-epoch runs of the binary, two per protocol (as
  # Cli.ThreadsChangeNoResult above, which it extends to every protocol).
  "Protocol.ThreadsChangeNoResultOfARun"
  # Three and one sweeps of the binary over shifts (the harness's tables and
  # merge, arch-independent; as Sweep.ShardsMerge... above). The in-plane
  # protocols' renders and splits are tested here by PlaneProtocols.HeldOut...
  "PlaneProtocols.ShardsOfAShiftSweepMergeIntoTheUnshardedTables"
  "PlaneProtocols.SweepStepsTheHeldOutShift"
  # Every swept protocol trained four times as a group and four times alone
  # (7 s native, past the 600 s limit emulated); arch-independent harness code.
  # Its sweep-level sibling, SweepGroups.ASweepsTablesAre..., runs here.
  "SweepGroups.RunExperimentsGivesEachConfigurationItsOwnRunsBits"
  # Fails on aarch64: three of its cases expect the x86-64 diagnostics of
  # --reproducible (on aarch64 the CPU check speaks first). Known, reported;
  # remove from this list once the test allows for it.
  "Cli.BadInputIsOneLineExitTwoNamingFlagAndValue"
)
# Not registered for aarch64 at all (CMakeLists.txt): `plots` (python runs the
# binary itself) and `isa_objects_define_no_weak_symbols` (x86-64 only).
regex=$(printf '^%s$|' "${excluded[@]}")
echo "cross_arm64: left out under qemu: ${excluded[*]}"
t0=$(now)
log=build/aarch64/ctest.log
status=0
ctest --preset aarch64 -j "$(nproc)" -E "${regex%|}" 2>&1 | tee "$log" || status=1
summary=$(grep -E '^[0-9]+% tests passed' "$log" || true)
total=$(sed -nE 's/.* out of ([0-9]+)$/\1/p' <<< "$summary")
failed=$(sed -nE 's/.*, ([0-9]+) tests? failed.*/\1/p' <<< "$summary")
skipped=$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped|Test +#[0-9]+: .* Skipped ' "$log" || true)
[ -n "$total" ] || die "ctest printed no summary (see $log)"
echo "cross_arm64: tests under qemu took $(secs "$t0") s: $((total - failed - skipped)) passed," \
     "$failed failed, $skipped skipped by the tests themselves, ${#excluded[@]} excluded (named above)"
[ "$status" -eq 0 ] || die "tests failed under qemu-aarch64"

t0=$(now)
qemu-aarch64 -L "$sys" build/aarch64/viewgap run --n-epochs 1 --quiet
echo "cross_arm64: viewgap run --n-epochs 1 under qemu took $(secs "$t0") s"
