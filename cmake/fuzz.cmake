# Fuzz targets (fuzz/*_fuzz.cpp). With clang and MEMKIT_FUZZ=ON they are libFuzzer
# binaries (scripts/fuzz.sh); otherwise each is a plain executable that replays its
# seed corpus (fuzz/corpus/<target>/), added to ctest with the label `fuzz`.
option(MEMKIT_FUZZ "Build the fuzz targets with libFuzzer (clang only)" OFF)
set(memkit_fuzz_targets api trace planner)

if(MEMKIT_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(STATUS "memkit: fuzzing off: MEMKIT_FUZZ needs clang (libFuzzer), found "
                 "${CMAKE_CXX_COMPILER_ID}; the corpora run as replay tests instead")
  set(MEMKIT_FUZZ OFF)
endif()
if(MEMKIT_FUZZ)
  # Coverage for the layers too, so the fuzzer sees inside the allocator.
  get_property(memkit_fuzzed_layers GLOBAL PROPERTY memkit_layers)
  foreach(layer ${memkit_fuzzed_layers})
    target_compile_options(${layer} PRIVATE -fsanitize=fuzzer-no-link)
  endforeach()
endif()

if(MEMKIT_TESTS)
  enable_testing()
endif()
foreach(target ${memkit_fuzz_targets})
  set(source ${PROJECT_SOURCE_DIR}/fuzz/${target}_fuzz.cpp)
  if(NOT EXISTS ${source})
    continue()
  endif()
  if(MEMKIT_FUZZ)
    add_executable(fuzz_${target} ${source})
    target_compile_options(fuzz_${target} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(fuzz_${target} ${source} ${PROJECT_SOURCE_DIR}/fuzz/replay_main.cpp)
    if(MEMKIT_TESTS)
      add_test(NAME fuzz.${target}.corpus
               COMMAND fuzz_${target} ${PROJECT_SOURCE_DIR}/fuzz/corpus/${target})
      set_tests_properties(fuzz.${target}.corpus PROPERTIES LABELS fuzz TIMEOUT 600)
    endif()
  endif()
  target_include_directories(fuzz_${target} PRIVATE ${PROJECT_SOURCE_DIR}/src
                                                    ${PROJECT_SOURCE_DIR}/tests)
  target_compile_options(fuzz_${target} PRIVATE ${memkit_warnings})
  target_link_libraries(fuzz_${target} PRIVATE memkit)
endforeach()
