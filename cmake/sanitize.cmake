# -DATTNCHECK_SANITIZE=ON builds everything with AddressSanitizer and
# UndefinedBehaviorSanitizer (./attncheck test --sanitize uses build-sanitize/).
# Undefined behaviour aborts instead of printing and going on, so a test that
# triggers it fails. These flags apply to the whole build on purpose: a
# sanitizer only sees memory that instrumented code touches.
option(ATTNCHECK_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
if(ATTNCHECK_SANITIZE)
  set(attncheck_sanitize_flags
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${attncheck_sanitize_flags})
  add_link_options(-fsanitize=address,undefined)
  # -O1 (AddressSanitizer asks for -O1 or higher): instrumented -O3 compiled
  # 1.5-3x slower (the fused kernels' file, built once per SIMD target: 240 s
  # against 88 s at -O1 on a loaded machine), and CI's time is mostly this build.
  foreach(lang C CXX)
    string(REGEX REPLACE "-O[0-9s]" "-O1" CMAKE_${lang}_FLAGS_RELEASE "${CMAKE_${lang}_FLAGS_RELEASE}")
  endforeach()
  # The command's glue (cli/, reports/) at -O0 here: instrumented JSON and
  # HTML code was this build's slowest files (reports/src/inputs.cpp 79 s at
  # -O1), and its tests run on small inputs (docs/reliability.md, "CI time").
  set(ATTNCHECK_GLUE_OPTIMIZATION -O0)
  # Highway code (the fused kernels, the peak probe, the peers' softmax) is
  # compiled for AVX3, AVX2 and the portable fallback only; the normal build
  # adds SSE4 and SSSE3. The kernels are one code at every target, and these
  # three cover 16, 8 and 1 float lanes.
  add_compile_definitions("HWY_DISABLED_TARGETS=(HWY_SSSE3|HWY_SSE4)")
  # What the sanitized run leaves to the normal one, to keep CI short (the
  # sanitized build and suite took 17 of 26 minutes on a 2-core machine with
  # everything in):
  # - the attncheck command's own files (CLI11 option parsing and glue) are not
  #   instrumented (target_compile_options in cli/CMakeLists.txt): CLI11's
  #   headers made them the slowest files of this build, 20-60 s each; every
  #   library they call is instrumented;
  # - benchmark executables and tests (bench/, reference_bench, impl_fused_bench,
  #   reference_cli:run_checks_every_golden_case): a benchmark under a sanitizer
  #   measures nothing; the suite behind `attncheck bench` is built at -O0 and
  #   not instrumented (bench/CMakeLists.txt);
  # - plugin_cli:* (attncheck verify end to end on hostile plugins and exec:
  #   children): the same loader and protocol code runs instrumented in
  #   plugin_tests and plugin_hostile_tests;
  # - the test cases tagged ATTNCHECK_NO_SANITIZE (cmake/attncheck_helpers.cmake):
  #   every mutant against the suite, 20 seeds of correct code, and the fused
  #   error's statistics (91, 75 and 36 s here, half of this suite's time); the
  #   same properties, mutants and kernels run instrumented in shorter tests
  #   (every property on the fused path, the replay and shrinking tests, the
  #   oracle grids of impl_tests).
  message(STATUS "attncheck: AddressSanitizer + UndefinedBehaviorSanitizer build (-O1)")
endif()
