# Writes ${OUT} with the current git commit (suffix -dirty for a modified tree),
# rewriting it only when it changes so builds stay incremental. This is the one
# rule for "dirty": meta.json, provenance.csv and `viewgap --version` carry it,
# and tools/make_results.sh takes its provenance's commit from `--version`.
# Dirty: a tracked file's content in the working tree differs from HEAD's (the
# tree is what is compiled; a change staged and then undone is not one).
# Untracked files do not count: CMakeLists.txt names every source, so a new
# file is compiled only through a tracked file that changed. results/ does not
# count: no result is compiled in, and make_results.sh rewrites it while its
# sweeps run.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git diff --name-only HEAD -- . :!results WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
elseif(dirty)
  string(APPEND commit "-dirty")
endif()
set(text "#define VIEWGAP_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
