# Run a program that plants a memory bug in the library and pass only if the
# sanitizer of the build reported it: a report (AddressSanitizer's ERROR or
# ThreadSanitizer's WARNING) whose stacks name both the planted free
# (FREE_FUNC) and the code that used the memory after it (USE_FILE).
# Catching the planted bug needs a thread to lose its CPU inside a window
# of a few instructions, so a run may end clean: the program is run up to
# ATTEMPTS times (a few seconds each) and the test passes at the first
# matching report. A run that fails some other way (a crash, a report about
# something else, a failed check) fails the test at once; so does a program
# that never gets reported.
#
#   cmake -DPROG=<exe> -DARGS=<args;...> -DFREE_FUNC=<function> -DUSE_FILE=<file>
#         -DATTEMPTS=<n> -P expect_sanitizer_report.cmake
foreach(attempt RANGE 1 ${ATTEMPTS})
  execute_process(COMMAND "${PROG}" ${ARGS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(all "${out}${err}")
  string(FIND "${all}" "ERROR: AddressSanitizer" at_asan)
  string(FIND "${all}" "WARNING: ThreadSanitizer" at_tsan)
  if(rc EQUAL 0 AND at_asan EQUAL -1 AND at_tsan EQUAL -1)
    message(STATUS "attempt ${attempt}: ran clean, no report")
    continue()
  endif()
  message("${out}")
  message("${err}")
  string(FIND "${all}" "${FREE_FUNC}" at_free)
  string(FIND "${all}" "${USE_FILE}" at_use)
  if((at_asan EQUAL -1 AND at_tsan EQUAL -1) OR at_free EQUAL -1 OR at_use EQUAL -1)
    message(FATAL_ERROR "attempt ${attempt}: exit code '${rc}', but not the planted bug "
                        "(a sanitizer report naming ${FREE_FUNC} and ${USE_FILE})")
  endif()
  message(STATUS "attempt ${attempt}: the sanitizer reported the planted use after "
                 "${FREE_FUNC} in ${USE_FILE}")
  return()
endforeach()
# In a process allowed one CPU (taskset, a cpuset) a thread loses its CPU
# only at the scheduler's tick, and the window is rarely met: under TSan
# pinned to one CPU beside two busy loops (2026-11-29) the early free was
# reported in 0 of 40 and 2 of 96 runs, and all 60 runs went clean in 3 of
# 19 tests; table_shrink's plant was reported in 2 of 20 runs, all 20 clean
# in 2 of 20 tests. As rare_paths and spill_burst do (exit 77 there), say
# "skipped", not "failed", when every run was clean and the process had
# one CPU. nproc counts the affinity mask (OMP_* unset: it would obey
# them); the test's SKIP_REGULAR_EXPRESSION (CMakeLists.txt) matches.
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=OMP_NUM_THREADS
                        --unset=OMP_THREAD_LIMIT nproc
                OUTPUT_VARIABLE ncpu OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE nproc_rc)
if(nproc_rc EQUAL 0 AND ncpu MATCHES "^[0-9]+$" AND ncpu LESS 2)
  message(STATUS "${ATTEMPTS} runs, no sanitizer report, on one CPU: "
                 "TW_PLANT_SKIPPED_ONE_CPU")
  return()
endif()
message(FATAL_ERROR "${ATTEMPTS} runs, no sanitizer report: the planted free went unseen")
