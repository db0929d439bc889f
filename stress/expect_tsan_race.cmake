# Run a program that plants a data race and pass only if ThreadSanitizer
# reported exactly that race: exit code 66 (TSan's default exitcode after a
# report) and a "data race" report that names the planted function and
# variable. Stricter than WILL_FAIL, which also passes on a crash or a setup
# error.
#
#   cmake -DPROG=<exe> -DARGS=<arg> -DFUNC=<function> -DVAR=<variable>
#         -P expect_tsan_race.cmake
execute_process(COMMAND "${PROG}" ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
message("${err}")
set(all "${out}${err}")
if(NOT rc EQUAL 66)
  message(FATAL_ERROR "expected exit code 66 (a TSan report), got '${rc}': "
                      "TSan did not report the planted race")
endif()
string(FIND "${all}" "WARNING: ThreadSanitizer: data race" at_race)
string(FIND "${all}" "${FUNC}" at_func)
string(FIND "${all}" "'${VAR}'" at_var)
if(at_race EQUAL -1 OR at_func EQUAL -1 OR at_var EQUAL -1)
  message(FATAL_ERROR "exit code 66, but the report is not the planted data race "
                      "on '${VAR}' in ${FUNC}")
endif()
message(STATUS "TSan reported the planted race on '${VAR}' in ${FUNC}")
