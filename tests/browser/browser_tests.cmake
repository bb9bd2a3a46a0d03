# The pages in a real browser: node's test runner (tests/browser/*.test.mjs)
# drives Debian's headless chromium through puppeteer-core. The launcher
# installs both (the chromium package, and `npm ci` here from the committed
# lock file); when either is missing the tests fail saying how to install it.
# Included from cli/CMakeLists.txt, where the attncheck command is defined.
# Labelled no_sanitize: the browser is not instrumented, and the pages the
# sanitized command writes are the same as the normal build's.
if(BUILD_TESTING)
  find_program(ATTNCHECK_NODE node)
  if(NOT ATTNCHECK_NODE)
    set(ATTNCHECK_NODE node)  # the test then fails: "Unable to find executable: node"
  endif()
  foreach(suite lab case)
    add_test(NAME browser:${suite}
             COMMAND ${ATTNCHECK_NODE} --test ${CMAKE_CURRENT_LIST_DIR}/${suite}.test.mjs
             WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
    set_tests_properties(browser:${suite} PROPERTIES
      LABELS "browser;no_sanitize" TIMEOUT 180
      ENVIRONMENT "ATTNCHECK_CLI=$<TARGET_FILE:attncheck_cli>;ATTNCHECK_BROWSER_WORK=${CMAKE_BINARY_DIR}/browser-tests/${suite}")
  endforeach()
endif()
