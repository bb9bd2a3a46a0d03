# Tests of hostile inputs, determinism and silent success (issue: reliability),
# kept beside what they test and registered here so that the owners'
# CMakeLists stay as they are.
if(NOT BUILD_TESTING)
  return()
endif()
set(src ${PROJECT_SOURCE_DIR})

attncheck_add_test(core_hostile_tests SOURCES ${src}/core/tests/hostile_case_test.cpp LIBS attncheck::core)

# Plugins whose attn_plugin description is broken: 1 name NULL, 2 name "",
# 3 forward NULL, 4 unknown feature bits.
foreach(which 1 2 3 4)
  attn_add_c_plugin(attn_broken_info_${which}_plugin SOURCE ${src}/plugin/tests/hostile_info_plugin.c
                    DEFINITIONS BROKEN=${which})
endforeach()
# Plugins that end their worker from inside forward or tamper with its
# control channel (plugin/tests/hostile_signal_plugin.c): name MODE [SIG].
set(attn_signal_plugins
    raise_segv 1 SIGSEGV  raise_bus 1 SIGBUS  raise_fpe 1 SIGFPE  raise_ill 1 SIGILL
    raise_abrt 1 SIGABRT  kill_segv 2 SIGSEGV  kill_kill 2 SIGKILL  real_fpe 3 0  real_ill 4 0
    abort 5 0  exit 6 0  underscore_exit 7 0  close_channel 8 0  write_channel 9 0
    close_and_hang 10 0  raise_large 11 SIGSEGV  pid_or_misbehave 12 SIGSEGV  reports_time 13 0
    reports_bad_time 14 0  takes_threads 15 0)
set(attn_signal_plugin_targets)
while(attn_signal_plugins)
  list(POP_FRONT attn_signal_plugins name mode sig)
  set(defs MODE=${mode})
  if(NOT sig STREQUAL "0")
    list(APPEND defs SIG=${sig})
  endif()
  attn_add_c_plugin(attn_signal_${name}_plugin SOURCE ${src}/plugin/tests/hostile_signal_plugin.c
                    DEFINITIONS ${defs})
  list(APPEND attn_signal_plugin_targets attn_signal_${name}_plugin)
endwhile()

attncheck_add_test(plugin_hostile_tests SOURCES ${src}/plugin/tests/hostile_plugin_test.cpp
                   ${src}/plugin/tests/worker_test.cpp LIBS attncheck::plugin)
target_include_directories(plugin_hostile_tests PRIVATE ${src}/plugin/src)
target_compile_definitions(plugin_hostile_tests PRIVATE ATTNCHECK_PLUGIN_DIR="${CMAKE_BINARY_DIR}/plugins"
                           ATTNCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(plugin_hostile_tests attn_broken_info_1_plugin attn_broken_info_2_plugin
                 attn_broken_info_3_plugin attn_broken_info_4_plugin attn_example_plugin
                 ${attn_signal_plugin_targets})

attncheck_add_test(cli_hostile_tests SOURCES ${src}/cli/tests/hostile_cli_test.cpp LIBS attncheck::core)
target_compile_definitions(cli_hostile_tests PRIVATE ATTNCHECK_CLI="$<TARGET_FILE:attncheck_cli>")
add_dependencies(cli_hostile_tests attncheck_cli)

attncheck_add_test(determinism_tests SOURCES ${src}/properties/tests/determinism_test.cpp
                   LIBS attncheck::properties attncheck::impl nlohmann_json::nlohmann_json)
target_compile_definitions(determinism_tests PRIVATE ATTNCHECK_CLI="$<TARGET_FILE:attncheck_cli>")
add_dependencies(determinism_tests attncheck_cli)

attncheck_add_test(silent_success_tests SOURCES ${src}/properties/tests/silent_success_test.cpp
                   LIBS attncheck::properties)

# Left out of the sanitizer run (label no_sanitize, ./attncheck test --sanitize):
# the consumer project is built by CTest without the sanitizer flags, so it
# cannot link the sanitized static libraries; the normal run covers it.
if(ATTNCHECK_SANITIZE AND TEST consumer:build)
  set_tests_properties(consumer:install consumer:configure consumer:build consumer:test
                       PROPERTIES LABELS no_sanitize)
endif()

# The hostile test plugins misbehave on purpose (a store through NULL, writes
# past their output) to check that the loader reports it. Like real third-party
# code they are not instrumented, so UBSan does not stop them before the fault
# the loader must see.
if(ATTNCHECK_SANITIZE)
  foreach(t attn_segfault_plugin attn_hang_plugin attn_write_past_output_plugin attn_write_input_plugin
            attn_unwritten_output_plugin attn_wrong_abi_plugin attn_write_before_output_plugin
            attn_init_crash_plugin ${attn_signal_plugin_targets})
    if(TARGET ${t})
      get_target_property(options ${t} COMPILE_OPTIONS)
      list(REMOVE_ITEM options ${attncheck_sanitize_flags})
      set_target_properties(${t} PROPERTIES COMPILE_OPTIONS "${options}")
    endif()
  endforeach()
endif()

attncheck_add_test(hostile_api_tests SOURCES ${src}/properties/tests/hostile_api_test.cpp
                   LIBS attncheck::properties attncheck::impl attncheck::reference attncheck::peers)

# CI at scale (issue 11): verify --shard and report's merging, time budgets,
# a child that hangs on one shape, shell-quoted replay lines.
attncheck_add_test(ci_verify_tests SOURCES ${src}/cli/tests/ci_verify_test.cpp LIBS nlohmann_json::nlohmann_json)
target_compile_definitions(ci_verify_tests PRIVATE ATTNCHECK_CLI="$<TARGET_FILE:attncheck_cli>"
                           ATTNCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(ci_verify_tests attncheck_cli)
