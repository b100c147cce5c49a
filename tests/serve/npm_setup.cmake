# npm_setup.cmake - fixture step of the serve tests (cmake -P): installs the committed
# package.json + package-lock.json (the official OpenAI SDK) into NPM_DIR with `npm ci`,
# once per lock file: a copy of the lock file installed last sits beside node_modules.
#
# Inputs (-D): NPM, SOURCE_DIR (tests/serve), NPM_DIR.
cmake_minimum_required(VERSION 3.20)

file(READ ${SOURCE_DIR}/package-lock.json want)
set(have "")
if(EXISTS ${NPM_DIR}/installed-lock.json AND EXISTS ${NPM_DIR}/node_modules/openai/package.json)
    file(READ ${NPM_DIR}/installed-lock.json have)
endif()
if(have STREQUAL want)
    message(STATUS "npm packages of the serve tests are installed")
    return()
endif()

file(MAKE_DIRECTORY ${NPM_DIR})
file(REMOVE ${NPM_DIR}/installed-lock.json)
configure_file(${SOURCE_DIR}/package.json ${NPM_DIR}/package.json COPYONLY)
configure_file(${SOURCE_DIR}/package-lock.json ${NPM_DIR}/package-lock.json COPYONLY)
execute_process(COMMAND ${NPM} ci --no-audit --no-fund
                WORKING_DIRECTORY ${NPM_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "npm ci in ${NPM_DIR} failed (${rc})")
endif()
configure_file(${SOURCE_DIR}/package-lock.json ${NPM_DIR}/installed-lock.json COPYONLY)
