# Warnings and sanitizers shared by every target of the project.
add_library(daqiri_build_flags INTERFACE)
target_compile_options(daqiri_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wimplicit-fallthrough>)
if(DAQIRI_WERROR)
  target_compile_options(daqiri_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # clang 16 implements what libstdc++ 12's <expected> needs (P0848) but does not advertise it
  # through __cpp_concepts, so <expected> would look empty without the override.
  target_compile_options(daqiri_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-builtin-macro-redefined -U__cpp_concepts
    -D__cpp_concepts=202002L>)
endif()

set(DAQIRI_SANITIZE "" CACHE STRING
  "Sanitizer build: '', 'address' (ASan+UBSan), 'thread' (TSan) or 'fuzz' (libFuzzer, clang)")
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
elseif(DAQIRI_SANITIZE STREQUAL "fuzz")
  # The fuzz targets (tests/fuzz, with clang): everything instrumented for libFuzzer's coverage
  # and under ASan+UBSan; only the targets themselves link libFuzzer's main.
  set(san -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
          -fno-omit-frame-pointer)
elseif(NOT DAQIRI_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DAQIRI_SANITIZE=${DAQIRI_SANITIZE}: expected '', address, thread or fuzz")
endif()
if(san)
  target_compile_options(daqiri_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${san}>)
  target_link_options(daqiri_build_flags INTERFACE ${san})
  message(STATUS "daqiri: sanitizer build: ${DAQIRI_SANITIZE}")
endif()

# Each target's sources are compiled sixteen to a unit (CMake's unity build): every unit parses
# gRPC's and protobuf's headers again, and CI makes four builds on two CPUs. tools/lint has
# clang-tidy parse the same units.
option(DAQIRI_UNITY_BUILD "Compile each target's sources in batches (unity build)" ON)
if(DAQIRI_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)
endif()

# gold (binutils: there wherever g++ is) links the project's programs about three times faster
# than ld.bfd, and CI links each of them in four builds. Links that nvcc drives keep its own.
option(DAQIRI_GOLD "Link C and C++ programs with gold" ON)
if(DAQIRI_GOLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=gold DAQIRI_HAVE_GOLD)
  if(DAQIRI_HAVE_GOLD)
    add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fuse-ld=gold>)
  endif()
endif()
