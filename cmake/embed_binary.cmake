# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=ns::name -P embed_binary.cmake
# Writes a C++ source defining `extern const std::span<const unsigned char> SYMBOL`: the file's
# bytes (a BPF object, say).
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX MATCH "^(.*)::([^:]+)$" _ "${SYMBOL}")
set(ns "${CMAKE_MATCH_1}")
set(name "${CMAKE_MATCH_2}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT}; do not edit.\n#include <span>\nnamespace ${ns} {\n"
  "namespace {\nconst unsigned char bytes[] = {${bytes}};\n}\n"
  "extern const std::span<const unsigned char> ${name};\n"
  "const std::span<const unsigned char> ${name}{bytes};\n}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
