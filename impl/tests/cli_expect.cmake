# Runs the attncheck CLI and checks its exit code and output.
#   cmake -DCLI=<attncheck> -DARGS="a;b" -DEXIT=<code> -DEXPECT=<regex> -P cli_expect.cmake
execute_process(COMMAND ${CLI} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT rc EQUAL EXIT)
  message(FATAL_ERROR "expected exit code ${EXIT}, got ${rc}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match: ${EXPECT}")
endif()
