# The Python package memkit (python/memkit): the pure-Python files and the compiled
# module _memkit (python/src/module.cpp, pybind11), laid out as an importable package
# in ${PROJECT_BINARY_DIR}/python. scripts/link_python.sh makes `import memkit` find
# it; the tests run it from there (python/tests, through pytest).
#
# Off, with the reason printed, when MEMKIT_PYTHON is OFF, pybind11 or the Python
# headers are missing, or under sanitizers: an instrumented module loaded into an
# uninstrumented python needs the sanitizer runtime preloaded, and its leak checker
# reports the interpreter's own allocations.
if(NOT MEMKIT_PYTHON)
  message(STATUS "memkit: python package off (MEMKIT_PYTHON=OFF)")
  return()
endif()
if(MEMKIT_SANITIZE)
  message(STATUS "memkit: python package off under sanitizers (MEMKIT_SANITIZE=${MEMKIT_SANITIZE})")
  return()
endif()

# The interpreter users run: `python3` on PATH unless Python_EXECUTABLE is given.
if(NOT DEFINED Python_EXECUTABLE)
  find_program(memkit_python3 python3)
  if(memkit_python3)
    set(Python_EXECUTABLE ${memkit_python3})
  endif()
endif()
find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module)
if(NOT Python_FOUND)
  message(STATUS "memkit: python package off (no Python 3 interpreter with its headers; "
                 "Debian: python3-dev)")
  return()
endif()
find_package(pybind11 2.6 CONFIG QUIET)
if(NOT pybind11_FOUND)
  message(STATUS "memkit: python package off (no pybind11; Debian: pybind11-dev)")
  return()
endif()
message(STATUS "memkit: python package on (Python ${Python_VERSION} at ${Python_EXECUTABLE}, "
               "pybind11 ${pybind11_VERSION})")

set(memkit_python_dir ${PROJECT_BINARY_DIR}/python/memkit)
# NO_EXTRAS: no LTO (a long link on two cores) and no stripping.
pybind11_add_module(memkit_python MODULE NO_EXTRAS python/src/module.cpp)
set_target_properties(memkit_python PROPERTIES
  OUTPUT_NAME _memkit LIBRARY_OUTPUT_DIRECTORY ${memkit_python_dir})
target_include_directories(memkit_python PRIVATE src)
target_compile_options(memkit_python PRIVATE ${memkit_warnings})
target_link_libraries(memkit_python PRIVATE memkit_reports memkit_trace memkit_planner memkit_core
  memkit_cpu memkit_sim nlohmann_json::nlohmann_json)
foreach(optional cuda vulkan)
  if(TARGET memkit_${optional})
    target_link_libraries(memkit_python PRIVATE memkit_${optional})
  endif()
endforeach()
# Keep the layers' symbols (and a static CUDA runtime) inside the module.
target_link_options(memkit_python PRIVATE -Wl,--exclude-libs,ALL)

# The pure-Python files, copied next to the module at build time (edit them under
# python/memkit; the build copies them again).
file(GLOB memkit_python_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/memkit/*.py)
set(memkit_python_copies)
foreach(source ${memkit_python_sources})
  get_filename_component(name ${source} NAME)
  add_custom_command(OUTPUT ${memkit_python_dir}/${name}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${source} ${memkit_python_dir}/${name}
    DEPENDS ${source} VERBATIM)
  list(APPEND memkit_python_copies ${memkit_python_dir}/${name})
endforeach()
add_custom_target(memkit_python_files ALL DEPENDS ${memkit_python_copies})
add_dependencies(memkit_python memkit_python_files)

# The PyTorch allocator library goes next to the package too, where memkit.torch,
# memkit.cupy and memkit.numba look for it first.
if(TARGET memkit_torch)
  add_custom_command(TARGET memkit_torch POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E make_directory ${memkit_python_dir}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different $<TARGET_FILE:memkit_torch> ${memkit_python_dir}/
    VERBATIM)
  add_dependencies(memkit_python memkit_torch)
endif()

if(NOT MEMKIT_TESTS)
  return()
endif()

# The interpreters here of the module's version: python3 as found above, and
# /usr/bin/python3 (Debian's) when it is another one. Each must import the package;
# pytest runs under the first that has it (Debian's python3-pytest).
set(memkit_python_interpreters "")
set(memkit_pytest_python "")
set(memkit_python_version "${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}")
foreach(candidate ${Python_EXECUTABLE} /usr/bin/python3)
  if(NOT EXISTS ${candidate})
    continue()
  endif()
  execute_process(
    COMMAND ${candidate} -c "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"
    OUTPUT_VARIABLE candidate_output OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE candidate_result ERROR_QUIET)
  if(NOT candidate_result EQUAL 0)
    continue()
  endif()
  string(REPLACE " " ";" candidate_output "${candidate_output}")
  list(GET candidate_output 0 candidate_version)
  list(GET candidate_output 1 candidate_real)
  if(NOT candidate_version STREQUAL memkit_python_version OR candidate_real IN_LIST memkit_python_real)
    continue()
  endif()
  list(APPEND memkit_python_real ${candidate_real})
  list(APPEND memkit_python_interpreters ${candidate})
  if(NOT memkit_pytest_python)
    execute_process(COMMAND ${candidate} -c "import pytest"
      RESULT_VARIABLE pytest_result OUTPUT_QUIET ERROR_QUIET)
    if(pytest_result EQUAL 0)
      set(memkit_pytest_python ${candidate})
    endif()
  endif()
endforeach()

set(memkit_python_environment
  "PYTHONPATH=${PROJECT_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1;MEMKIT_SOURCE_DIR=${PROJECT_SOURCE_DIR};MEMKIT_BINARY_DIR=${PROJECT_BINARY_DIR}")
file(GLOB memkit_python_tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/tests/test_*.py)
foreach(test_file ${memkit_python_tests})
  get_filename_component(name ${test_file} NAME_WE)
  string(REGEX REPLACE "^test_" "" name ${name})
  if(memkit_pytest_python)
    # -rs: every skipped test prints its reason.
    add_test(NAME python.${name}
      COMMAND ${memkit_pytest_python} -m pytest -q -rs -p no:cacheprovider ${test_file})
    # A file whose every test skipped (no PyTorch, no GPU) shows as skipped.
    set_tests_properties(python.${name} PROPERTIES TIMEOUT 600
      ENVIRONMENT "${memkit_python_environment}"
      SKIP_REGULAR_EXPRESSION "\n[0-9]+ skipped in ")
  else()
    add_test(NAME python.${name} COMMAND sh -c
      "echo 'skipped: no python${memkit_python_version} with pytest (Debian: python3-pytest)'; exit 77")
    set_tests_properties(python.${name} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endforeach()

set(index 0)
foreach(interpreter ${memkit_python_interpreters})
  math(EXPR index "${index} + 1")
  add_test(NAME python.import.${index}
    COMMAND ${interpreter} -c "import sys, memkit; assert memkit.__version__ == '${PROJECT_VERSION}', memkit.__version__; print(sys.executable, memkit.__file__)")
  set_tests_properties(python.import.${index} PROPERTIES ENVIRONMENT "${memkit_python_environment}")
endforeach()
