# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=ns::name -P embed_text.cmake
# Writes a C++ source defining `extern const char* const SYMBOL` with the file's text.
file(READ "${INPUT}" text)
string(REGEX MATCH "^(.*)::([^:]+)$" _ "${SYMBOL}")
set(ns "${CMAKE_MATCH_1}")
set(name "${CMAKE_MATCH_2}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT}; do not edit.\nnamespace ${ns} {\nextern const char* const ${name};\n"
  "const char* const ${name} = R\"daqiri_embedded(${text})daqiri_embedded\";\n}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
