# Warnings are set per target, never through global flags.
add_library(attncheck_warnings INTERFACE)
target_compile_options(attncheck_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wpedantic>)
add_library(attncheck::warnings ALIAS attncheck_warnings)

# One Catch2 main, compiled once and shared by every test executable.
add_library(attncheck_catch_main OBJECT ${CMAKE_SOURCE_DIR}/cmake/catch_main.cpp)
target_link_libraries(attncheck_catch_main PUBLIC Catch2::Catch2)

# attncheck_add_test(NAME SOURCES a.cpp b.cpp LIBS x y)
# Builds one Catch2 executable and registers each TEST_CASE with CTest.
# A TEST_CASE tagged ATTNCHECK_NO_SANITIZE (appended to its tags: "[x]"
# ATTNCHECK_NO_SANITIZE) is hidden in the sanitized build, so it runs in the
# normal run only: the statistical and many-seed tests whose code the
# sanitized run already covers with shorter tests (cmake/sanitize.cmake).
function(attncheck_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES} $<TARGET_OBJECTS:attncheck_catch_main>)
  target_link_libraries(${name} PRIVATE Catch2::Catch2 attncheck::warnings ${T_LIBS})
  if(ATTNCHECK_SANITIZE)
    target_compile_definitions(${name} PRIVATE "ATTNCHECK_NO_SANITIZE=\"[.][no_sanitize]\"")
  else()
    target_compile_definitions(${name} PRIVATE "ATTNCHECK_NO_SANITIZE=\"[no_sanitize]\"")
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  catch_discover_tests(${name} TEST_PREFIX "${name}:" PROPERTIES TIMEOUT 600)
endfunction()
