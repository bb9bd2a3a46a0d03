# One precompiled header for every test executable built at
# ATTNCHECK_TEST_OPTIMIZATION (attncheck_add_test): the heaviest third-party
# headers that the test files share. Reusing it, a test file compiled in
# 0.69-0.97 of the time (docs/reliability.md, "CI time").
# Included after cmake/sanitize.cmake, so that it is built with the same
# flags as the tests that reuse it; a test whose flags differ would fall back
# to parsing the headers (GCC checks, and -Winvalid-pch says so).
# An executable, like the tests, so that its flags are theirs (-fPIE where a
# library would have -fPIC); it is never run.
if(NOT BUILD_TESTING)
  return()
endif()
add_executable(attncheck_test_pch ${CMAKE_SOURCE_DIR}/cmake/test_pch.cpp)
# Not fmt: its core.h switches GCC to optimize("Og") between push_options and
# pop_options, and a precompiled header does not restore the pop, so every
# file using it would be compiled with __OPTIMIZE__ defined (Eigen's
# intrinsics then fail to compile at -O0).
target_link_libraries(attncheck_test_pch PRIVATE Catch2::Catch2 nlohmann_json::nlohmann_json rapidcheck
                                                 attncheck::warnings)
target_compile_options(attncheck_test_pch PRIVATE ${ATTNCHECK_TEST_OPTIMIZATION})
target_precompile_headers(attncheck_test_pch PRIVATE <catch2/catch.hpp> <nlohmann/json.hpp> <rapidcheck.h>)
