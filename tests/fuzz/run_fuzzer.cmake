# Run a libFuzzer target briefly, as ctest's test of label fuzz:
#   cmake -D FUZZER=path -D WORK=dir -D SEEDS="dir;dir" -D ARGS="-runs=N;..." -P run_fuzzer.cmake
# Every *.scn under SEEDS is copied to WORK/seeds (numbered: names repeat
# across folders), the fuzzer writes what it finds to WORK/new, and a
# crash, leak or timeout (a non-zero exit) fails the test with the
# fuzzer's output, which names the input that did it.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/seeds ${WORK}/new)
set(n 0)
foreach(dir ${SEEDS})
  file(GLOB_RECURSE found ${dir}/*.scn)
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
