# Warnings and sanitizers shared by every target of the project.
add_library(daqiri_build_flags INTERFACE)
target_compile_options(daqiri_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough>)
if(DAQIRI_WERROR)
  target_compile_options(daqiri_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

set(DAQIRI_SANITIZE "" CACHE STRING "Sanitizer build: '', 'address' (ASan+UBSan) or 'thread' (TSan)")
if(DAQIRI_SANITIZE STREQUAL "address")
  set(san -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(DAQIRI_SANITIZE STREQUAL "thread")
  set(san -fsanitize=thread -fno-omit-frame-pointer)
  # Our binaries export their instrumented copies of shared_ptr's release path, and Debian's
  # uninstrumented gRPC binds to them: its threads drop a reference in gRPC (unseen by TSan)
  # and free the object in our copy (seen), which TSan reports as a race with whichever of our
  # threads last read it. Kept local, gRPC runs its own copies and its frees are ignored with
  # the rest of it (tests/tsan.supp).
  target_link_options(daqiri_build_flags INTERFACE
    -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/tsan-exports.map)
elseif(NOT DAQIRI_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DAQIRI_SANITIZE=${DAQIRI_SANITIZE}: expected '', address or thread")
endif()
if(san)
  target_compile_options(daqiri_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${san}>)
  target_link_options(daqiri_build_flags INTERFACE ${san})
  message(STATUS "daqiri: sanitizer build: ${DAQIRI_SANITIZE}")
endif()
