# `cmake --install` exports a CMake package: find_package(attncheck) gives
# attncheck::properties (the property suite and verify runner), attncheck::core,
# attncheck::reference, attncheck::impl, attncheck::plugin (loader and exec:
# client) and attncheck::plugin_abi (attn_plugin.h alone), with their headers.
# Included from the root CMakeLists.txt after every folder.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Every library the exported ones link, privately included: static libraries
# carry their private dependencies to the consumer's link line.
set(attncheck_export_names
  attncheck_core:core attncheck_reference:reference attncheck_impl:impl
  attncheck_peers:peers attncheck_peak:peak attncheck_openblas:openblas attncheck_properties:properties
  attncheck_plugin:plugin attncheck_plugin_abi:plugin_abi attncheck_warnings:warnings)
set(attncheck_exported_targets)
foreach(pair IN LISTS attncheck_export_names)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 target)
  list(GET pair 1 export_name)
  if(TARGET ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
    list(APPEND attncheck_exported_targets ${target})
  endif()
endforeach()

install(TARGETS ${attncheck_exported_targets} EXPORT attncheckTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(dir core reference impl bench properties plugin)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${dir}/include)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
endforeach()

set(attncheck_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/attncheck)
install(EXPORT attncheckTargets NAMESPACE attncheck:: DESTINATION ${attncheck_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attncheckConfig.cmake.in
  ${CMAKE_BINARY_DIR}/attncheckConfig.cmake INSTALL_DESTINATION ${attncheck_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/attncheckConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/attncheckConfig.cmake ${CMAKE_BINARY_DIR}/attncheckConfigVersion.cmake
        DESTINATION ${attncheck_cmake_dir})

# A consumer project (examples/consumer) installed against and built by CTest:
# install into a scratch prefix, configure and build the consumer, run its tests.
# The consumer is built with -march=native and the library without: the
# public headers must not hand out types whose layout depends on ISA flags.
# It is built at -O0: its one file is set-up and calls into the installed
# (optimized) libraries; it compiled in 21 s instead of 38-40 s at -O3.
if(BUILD_TESTING AND TARGET attncheck_properties AND TARGET attncheck_plugin)
  set(scratch ${CMAKE_BINARY_DIR}/consumer-test)
  add_test(NAME consumer:install
           COMMAND ${CMAKE_COMMAND} --install ${CMAKE_BINARY_DIR} --prefix ${scratch}/prefix)
  add_test(NAME consumer:configure
           COMMAND ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR}/examples/consumer -B ${scratch}/build -G Ninja
                   -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${scratch}/prefix
                   -DCMAKE_CXX_FLAGS=-march=native -DCMAKE_CXX_FLAGS_RELEASE=-O0)
  add_test(NAME consumer:build COMMAND ${CMAKE_COMMAND} --build ${scratch}/build)
  add_test(NAME consumer:test COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${scratch}/build
                                      --output-on-failure --no-tests=error)
  set_tests_properties(consumer:install PROPERTIES FIXTURES_SETUP consumer_installed)
  set_tests_properties(consumer:configure PROPERTIES FIXTURES_REQUIRED consumer_installed
                                                     FIXTURES_SETUP consumer_configured)
  set_tests_properties(consumer:build PROPERTIES FIXTURES_REQUIRED consumer_configured
                                                 FIXTURES_SETUP consumer_built TIMEOUT 600)
  set_tests_properties(consumer:test PROPERTIES FIXTURES_REQUIRED consumer_built)
  set_tests_properties(consumer:install consumer:configure consumer:build consumer:test
                       PROPERTIES RESOURCE_LOCK consumer_scratch)
endif()
