# Writes ${OUT} with the current git commit (suffix -dirty for a modified tree),
# rewriting it only when it changes so builds stay incremental. results/ does
# not count: no result is compiled in, and tools/make_results.sh, which
# rewrites results/ while its sweeps run, judges its provenance by this rule.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no -- . :!results WORKING_DIRECTORY ${SRC}
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
