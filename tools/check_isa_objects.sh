#!/usr/bin/env bash
# One binary must run on any CPU of its architecture: a weak (COMDAT) symbol
# defined by an ISA-specific object (built with -mavx2/-mavx512f) could be the
# copy the linker keeps for every caller. Fails if any such object defines one.
# Usage: bash tools/check_isa_objects.sh OBJECT...
set -euo pipefail
bad=0
for o in "$@"; do
  case "$o" in *_avx2.cpp.o|*_avx512.cpp.o|*_neon.cpp.o) ;; *) continue ;; esac
  # DW.ref.__gxx_personality_v0 is the unwinder's pointer to its personality
  # routine (data, same in every object), not code built for the ISA.
  if nm -C --defined-only "$o" | grep -E ' [WVu] ' | grep -v 'DW\.ref\.__gxx_personality_v0'; then
    echo "check_isa_objects: $o defines weak symbols (above): keep ISA code in anonymous namespaces and fully inlined" >&2
    bad=1
  fi
done
exit $bad
