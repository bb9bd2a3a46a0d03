# Warnings are set per target, never through global flags.
add_library(attncheck_warnings INTERFACE)
target_compile_options(attncheck_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wpedantic>)
add_library(attncheck::warnings ALIAS attncheck_warnings)

# Optimisation where it buys nothing but build time. Test code (Catch2 cases:
# set up, call, compare) builds at -O0 and the command's glue (option parsing,
# reports, pages) at -O1, whatever the build type; the code under test and
# under measurement (kernels, reference, properties, peers, benchmark suite)
# keeps the build type's flags. A test file at -O0 compiles about 3x faster
# than at -O3, sanitized or not (docs/reliability.md, "CI time"). The option
# comes after the build type's -O in the command line, so it wins.
set(ATTNCHECK_TEST_OPTIMIZATION -O0)
set(ATTNCHECK_GLUE_OPTIMIZATION -O1)

# attncheck_unity_build(target ...): compiles each target's sources four at a
# time as one translation unit (CMake's unity build), so that the heavy headers
# they share (nlohmann-json, RapidCheck, CLI11, Catch2, fmt) are parsed and
# their templates instantiated once per batch instead of once per file: the
# properties library built in 0.70x the CPU time (docs/reliability.md, "CI
# time"). Not for Highway code, whose files include themselves once per SIMD
# target, nor for the reference, whose files per scalar type are split to
# compile in parallel.
set(ATTNCHECK_UNITY_BATCH_SIZE 4)
function(attncheck_unity_build)
  set_target_properties(${ARGN} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ATTNCHECK_UNITY_BATCH_SIZE})
endfunction()

# One Catch2 main, compiled once and shared by every test executable.
add_library(attncheck_catch_main OBJECT ${CMAKE_SOURCE_DIR}/cmake/catch_main.cpp)
target_link_libraries(attncheck_catch_main PUBLIC Catch2::Catch2)
target_compile_options(attncheck_catch_main PRIVATE ${ATTNCHECK_TEST_OPTIMIZATION})

# attncheck_add_test(NAME SOURCES a.cpp b.cpp LIBS x y [OPTIMIZED])
# Builds one Catch2 executable and registers each TEST_CASE with CTest, at
# ATTNCHECK_TEST_OPTIMIZATION unless OPTIMIZED: tests that compute heavily in
# their own files (impl_tests: a naive fp32 composition at n = 2048 and bounds
# over large grids ran 2x slower at -O0) keep the build type's flags. The
# others reuse one precompiled header of the shared third-party headers
# (cmake/test_pch.cmake).
# A TEST_CASE tagged ATTNCHECK_NO_SANITIZE (appended to its tags: "[x]"
# ATTNCHECK_NO_SANITIZE) is hidden in the sanitized build, so it runs in the
# normal run only: the statistical and many-seed tests whose code the
# sanitized run already covers with shorter tests (cmake/sanitize.cmake).
function(attncheck_add_test name)
  cmake_parse_arguments(T "OPTIMIZED" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES} $<TARGET_OBJECTS:attncheck_catch_main>)
  target_link_libraries(${name} PRIVATE Catch2::Catch2 attncheck::warnings ${T_LIBS})
  if(NOT T_OPTIMIZED)
    target_compile_options(${name} PRIVATE ${ATTNCHECK_TEST_OPTIMIZATION} -Winvalid-pch)
    target_precompile_headers(${name} REUSE_FROM attncheck_test_pch)
  endif()
  if(ATTNCHECK_SANITIZE)
    target_compile_definitions(${name} PRIVATE "ATTNCHECK_NO_SANITIZE=\"[.][no_sanitize]\"")
  else()
    target_compile_definitions(${name} PRIVATE "ATTNCHECK_NO_SANITIZE=\"[no_sanitize]\"")
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  attncheck_unity_build(${name})
  catch_discover_tests(${name} TEST_PREFIX "${name}:" PROPERTIES TIMEOUT 600)
endfunction()
