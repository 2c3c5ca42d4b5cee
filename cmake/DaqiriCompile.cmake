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
  # Our binaries would otherwise export their instrumented copies of inline library code
  # (shared_ptr's release path) and Debian's uninstrumented gRPC would bind to them: its threads
  # then free their own objects through our copy after a reference drop TSan never saw, a false
  # race. Hidden, gRPC keeps its own copies, and frees from it are ignored like the rest of it.
  target_compile_options(daqiri_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fvisibility-inlines-hidden>)
elseif(NOT DAQIRI_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DAQIRI_SANITIZE=${DAQIRI_SANITIZE}: expected '', address or thread")
endif()
if(san)
  target_compile_options(daqiri_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${san}>)
  target_link_options(daqiri_build_flags INTERFACE ${san})
  message(STATUS "daqiri: sanitizer build: ${DAQIRI_SANITIZE}")
endif()
