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
  message(STATUS "attncheck: AddressSanitizer + UndefinedBehaviorSanitizer build")
endif()
