# libFuzzer targets, built with clang (the main build uses g++, and libFuzzer
# ships with clang: Debian packages clang and libclang-rt-14-dev). Each fuzzer
# is compiled by one clang++ command with ASan and UBSan; CTest runs a 30 s
# smoke of each (label "fuzz") from the seed corpus in the repository. New
# inputs it finds go to the build directory, crashes to fuzz/<name>/crash-*.
# Skipped in the sanitizer build: the fuzzers are sanitized already.
if(ATTNCHECK_SANITIZE OR NOT BUILD_TESTING)
  return()
endif()
find_program(ATTNCHECK_CLANGXX NAMES clang++-14 clang++)
if(NOT ATTNCHECK_CLANGXX)
  message(WARNING "attncheck: clang++ not found; fuzz targets not built (apt-get install clang libclang-rt-14-dev)")
  return()
endif()
find_library(ATTNCHECK_FMT_LIBRARY fmt REQUIRED)
set(ATTNCHECK_FUZZ_SECONDS 30 CACHE STRING "Length of each fuzz smoke run in the test suite")

# attncheck_add_fuzzer(NAME SOURCES a.cpp ... INCLUDES dir ... CORPUS dir)
function(attncheck_add_fuzzer name)
  cmake_parse_arguments(F "" "CORPUS" "SOURCES;INCLUDES" ${ARGN})
  set(dir ${CMAKE_BINARY_DIR}/fuzz/${name})
  set(exe ${dir}/${name})
  list(TRANSFORM F_INCLUDES PREPEND -I)
  add_custom_command(
    OUTPUT ${exe}
    COMMAND ${ATTNCHECK_CLANGXX} -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined
            -fno-sanitize-recover=undefined -fno-omit-frame-pointer ${F_INCLUDES}
            -MD -MF ${exe}.d ${F_SOURCES} ${ATTNCHECK_FMT_LIBRARY} -o ${exe}
    DEPENDS ${F_SOURCES}
    DEPFILE ${exe}.d
    COMMENT "Building fuzzer ${name} with clang"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${exe})
  file(MAKE_DIRECTORY ${dir}/corpus)
  # New corpus entries are written to the first directory only (the build's).
  add_test(NAME fuzz:${name}
           COMMAND ${exe} -max_total_time=${ATTNCHECK_FUZZ_SECONDS} -seed=1 -timeout=10
                   -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=${dir}/
                   ${dir}/corpus ${F_CORPUS})
  set_tests_properties(fuzz:${name} PROPERTIES LABELS fuzz TIMEOUT 300)
endfunction()

set(src ${PROJECT_SOURCE_DIR})
attncheck_add_fuzzer(case_json_fuzz
  SOURCES ${src}/core/fuzz/case_json_fuzz.cpp ${src}/core/src/case.cpp ${src}/core/src/problem.cpp
  INCLUDES ${src}/core/include
  CORPUS ${src}/core/fuzz/corpus)
attncheck_add_fuzzer(protocol_fuzz
  SOURCES ${src}/plugin/fuzz/protocol_fuzz.cpp ${src}/plugin/src/exec_protocol.cpp
          ${src}/plugin/src/abi.cpp ${src}/core/src/problem.cpp
  INCLUDES ${src}/core/include ${src}/plugin/include ${src}/plugin/src ${src}/properties/include
  CORPUS ${src}/plugin/fuzz/corpus)
