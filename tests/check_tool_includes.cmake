# check_tool_includes.cmake - tools are clients of the public API (STYLE rule 19): every
# #include in tools/kztts and its subfolders names a system or library header, kztts.h,
# or a header of tools/kztts itself; never a header of src/ (which the build's include
# path would let through).
# Usage: cmake -DSOURCE=<project root> -P check_tool_includes.cmake
cmake_policy(VERSION 3.20)

file(GLOB_RECURSE files RELATIVE ${SOURCE} ${SOURCE}/tools/kztts/*.c ${SOURCE}/tools/kztts/*.h)
set(bad 0)
foreach(f ${files})
    file(STRINGS ${SOURCE}/${f} lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*" "\\1" h "${line}")
        get_filename_component(dir ${SOURCE}/${f} DIRECTORY)
        if(h STREQUAL "kztts.h" OR EXISTS ${dir}/${h} OR EXISTS ${SOURCE}/tools/kztts/${h})
            continue()
        endif()
        if(EXISTS ${SOURCE}/src/${h})
            message(SEND_ERROR "${f}: includes \"${h}\" from src/; tools use kztts.h only")
            math(EXPR bad "${bad} + 1")
        endif()
    endforeach()
endforeach()
if(bad EQUAL 0)
    message(STATUS "tools/kztts: includes ok")
endif()
