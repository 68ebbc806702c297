# Helpers shared by every part's CMakeLists.txt.
#
#   moerl_library(io SOURCES a.cc b.cc DEPS moerl_base)  -> static library moerl_io
#   moerl_tests(io DEPS moerl_io)                        -> test binary moerl_io_tests from
#                                                           every src/io/*_test.cc, one ctest
#   moerl_tests(jinja DIR model/jinja ...)               -> tests of a sub-folder (DIR), which the
#   moerl_tests(model EXCLUDE model/jinja ...)              parent part then EXCLUDEs
# A part's tests live beside its code as *_test.cc; adding a test file needs no CMake edit.

set(MOERL_SRC ${PROJECT_SOURCE_DIR}/src)

function(moerl_library part)
  cmake_parse_arguments(A "TORCH" "" "SOURCES;DEPS" ${ARGN})
  add_library(moerl_${part} STATIC ${A_SOURCES})
  target_include_directories(moerl_${part} PUBLIC ${MOERL_SRC})
  target_compile_options(moerl_${part} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  target_link_libraries(moerl_${part} PUBLIC ${A_DEPS})
  if(A_TORCH)
    moerl_use_torch(moerl_${part})
  endif()
endfunction()

# libtorch: link, and share one precompiled header across targets (2-core builds).
function(moerl_use_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  target_compile_options(${target} PRIVATE -Wno-unused-parameter -Wno-deprecated-declarations
    $<$<COMPILE_LANGUAGE:CXX>:-fpch-preprocess>)
  if(NOT TARGET moerl_torch_pch)
    add_library(moerl_torch_pch STATIC ${MOERL_SRC}/base/torch_pch.cc)
    target_link_libraries(moerl_torch_pch PUBLIC ${TORCH_LIBRARIES})
    target_compile_options(moerl_torch_pch PRIVATE -Wno-unused-parameter -Wno-deprecated-declarations
      $<$<COMPILE_LANGUAGE:CXX>:-fpch-preprocess>)
    target_precompile_headers(moerl_torch_pch PRIVATE <torch/torch.h>)
  endif()
  if(NOT target STREQUAL moerl_torch_pch)
    target_precompile_headers(${target} REUSE_FROM moerl_torch_pch)
  endif()
endfunction()

function(moerl_tests part)
  cmake_parse_arguments(A "TORCH" "TIMEOUT;DIR;EXCLUDE" "DEPS;EXTRA_SOURCES" ${ARGN})
  if(NOT MOERL_TESTS)
    return()
  endif()
  if(NOT A_DIR)
    set(A_DIR ${part})
  endif()
  file(GLOB srcs CONFIGURE_DEPENDS ${MOERL_SRC}/${A_DIR}/*_test.cc ${MOERL_SRC}/${A_DIR}/*/*_test.cc)
  if(A_EXCLUDE)
    list(FILTER srcs EXCLUDE REGEX "^${MOERL_SRC}/${A_EXCLUDE}/")
  endif()
  if(NOT srcs)
    return()
  endif()
  set(t moerl_${part}_tests)
  add_executable(${t} ${srcs} ${A_EXTRA_SOURCES})
  target_link_libraries(${t} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_options(${t} PRIVATE -Wall -Wno-unused-parameter)
  if(A_TORCH)
    moerl_use_torch(${t})
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 900)
  endif()
  add_test(NAME ${part} COMMAND ${t} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${part} PROPERTIES TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "MOERL_BIN=$<TARGET_FILE:moerl>;MOERL_SOURCE_DIR=${PROJECT_SOURCE_DIR};OMP_NUM_THREADS=1")
endfunction()
