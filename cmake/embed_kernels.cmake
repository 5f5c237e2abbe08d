# Writes OUTPUT: a C file holding every cl/*.cl source as a byte array and a
# table naming them by file stem. Run with -DSOURCES="a.cl;b.cl" -DOUTPUT=file.
# A line `#include "other.cl"` of a source is replaced by the text of
# cl/other.cl (one level: an included file's own includes stay), so a
# program can be another built with a macro defined (cl/gemm_cpu_f16.cl).
set(body "/* Generated from the kernel sources by cmake/embed_kernels.cmake. */\n#include <stddef.h>\n#include \"kernels/sources.h\"\n")
set(table "")
set(count 0)
foreach(src IN LISTS SOURCES)
  get_filename_component(stem "${src}" NAME_WE)
  get_filename_component(dir "${src}" DIRECTORY)
  file(READ "${src}" text)
  string(REGEX MATCHALL "#include \"[A-Za-z0-9_]+\\.cl\"" includes "${text}")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "#include \"(.*)\"" "\\1" name "${line}")
    file(READ "${dir}/${name}" included)
    string(REPLACE "${line}" "${included}" text "${text}")
  endforeach()
  string(HEX "${text}" hex)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(APPEND body "static const char src_${stem}[] = {${hex}0};\n")
  string(APPEND table "    {\"${stem}\", src_${stem}},\n")
  math(EXPR count "${count} + 1")
endforeach()
string(APPEND body "const clt__kernel_source clt__kernel_sources[] = {\n${table}};\n")
string(APPEND body "const int clt__kernel_source_count = ${count};\n")
file(WRITE "${OUTPUT}.tmp" "${body}")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
