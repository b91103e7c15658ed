# Run a libFuzzer target briefly, as ctest's test of label fuzz:
#   cmake -D FUZZER=path -D WORK=dir -D SEEDS="dir|dir" -D ARGS="-runs=N|..." -P run_fuzzer.cmake
# (lists separated by '|': a ';' would reach this script escaped, through
# ctest, and not separate anything).
# Every file under each folder of SEEDS is copied to WORK/seeds (numbered:
# names repeat across folders); an entry with a '*' is a pattern instead
# (scenarios/*.scn: the .scn files under scenarios/, at any depth).  The
# fuzzer writes what it finds to WORK/new, and a
# crash, leak or timeout (a non-zero exit) fails the test with the
# fuzzer's output, which names the input that did it.
string(REPLACE "|" ";" SEEDS "${SEEDS}")
string(REPLACE "|" ";" ARGS "${ARGS}")
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/seeds ${WORK}/new)
set(n 0)
foreach(dir ${SEEDS})
  if(dir MATCHES "[*]")
    file(GLOB_RECURSE found ${dir})
  else()
    file(GLOB_RECURSE found ${dir}/*)
  endif()
  foreach(f ${found})
    math(EXPR n "${n} + 1")
    get_filename_component(base ${f} NAME)
    configure_file(${f} ${WORK}/seeds/${n}-${base} COPYONLY)
  endforeach()
endforeach()
message(STATUS "${n} seeds")
execute_process(COMMAND ${FUZZER} ${ARGS} -artifact_prefix=${WORK}/ ${WORK}/new ${WORK}/seeds
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} exited with ${rc}; the input is in ${WORK}")
endif()
