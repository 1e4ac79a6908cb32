# memkit's layers as build targets, and the rule of which may use which.
#
# Each layer is a static library memkit_<name> (memkit::<name> once installed) with
# an explicit list of sources. A layer may link only the layers and libraries named
# for it in memkit_allowed_<name> below: memkit_check_layers() stops the configure
# step when a layer links anything else, and the ctest test `layers.symbols`
# (tests/layers/check_symbols.sh) checks that each layer's object code calls no
# function defined outside the layers it may use (a call that no link states).
#
#   backend   the memory and data interfaces, shared_memory       (nothing)
#   solver    the planner's numbers                              (nothing)
#   core      placement, pools, allocator                        backend, solver
#   cpu, sim, cuda, vulkan, adaptors                             backend
#   devices   several devices, sharing across processes          core
#   arrays    handles, encoder, usage scopes, buffers            core
#   io        input files, plain or gzip, within bounds         (zlib)
#   trace_read  trace readers (memkit CSV, RMM, PyTorch)         io
#   planner   instance and plan files, graph plans               solver, arrays, io, trace_read
#   trace     replay, HTML report                                core, cpu, sim, trace_read
#   capi      the C API                                          core and every backend
#
# zlib is for io alone, the JSON library for the trace layers alone, and CLI11
# for the command-line tool alone.

set(memkit_allowed_backend "")
set(memkit_allowed_solver "")
set(memkit_allowed_core memkit_backend memkit_solver Threads::Threads)
set(memkit_allowed_cpu memkit_backend)
set(memkit_allowed_sim memkit_backend Threads::Threads)
set(memkit_allowed_cuda memkit_backend CUDA::cudart_static)
set(memkit_allowed_vulkan memkit_backend Vulkan::Vulkan)
set(memkit_allowed_adaptors memkit_backend)
set(memkit_allowed_devices memkit_core memkit_backend Threads::Threads ${CMAKE_DL_LIBS})
set(memkit_allowed_arrays memkit_core)
set(memkit_allowed_io ZLIB::ZLIB)
set(memkit_allowed_trace_read memkit_io nlohmann_json::nlohmann_json)
set(memkit_allowed_planner memkit_solver memkit_arrays memkit_io memkit_trace_read)
set(memkit_allowed_trace memkit_core memkit_cpu memkit_sim memkit_trace_read nlohmann_json::nlohmann_json)
set(memkit_allowed_capi memkit_core memkit_cpu memkit_sim memkit_cuda memkit_vulkan)

# memkit_add_layer(<name> SOURCES <file>...): the static library memkit_<name>, with
# the public headers (source tree and installed) and the project's warnings.
function(memkit_add_layer name)
  cmake_parse_arguments(arg "" "" "SOURCES" ${ARGN})
  if(NOT DEFINED memkit_allowed_${name})
    message(FATAL_ERROR "[memkit_add_layer] ${name} has no rule in cmake/layers.cmake")
  endif()
  set(target memkit_${name})
  add_library(${target} STATIC ${arg_SOURCES})
  add_library(memkit::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${target} PRIVATE ${memkit_warnings})
  set_property(GLOBAL APPEND PROPERTY memkit_layers ${target})
endfunction()

# The names a layer links, without the generator expressions that wrap them.
function(memkit_layer_links target out)
  get_target_property(direct ${target} LINK_LIBRARIES)
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  set(names)
  foreach(item IN LISTS direct interface)
    if(NOT item OR item MATCHES "-NOTFOUND$")
      continue()
    endif()
    # Unwrap $<LINK_ONLY:...> and $<BUILD_INTERFACE:...>, nested or not.
    while(item MATCHES "^\\$<(LINK_ONLY|BUILD_INTERFACE):(.*)>$")
      set(item "${CMAKE_MATCH_2}")
    endwhile()
    list(APPEND names ${item})
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# Stops the configure step when a layer links what its rule does not allow.
function(memkit_check_layers)
  get_property(layers GLOBAL PROPERTY memkit_layers)
  set(errors)
  foreach(target ${layers})
    string(REGEX REPLACE "^memkit_" "" name ${target})
    memkit_layer_links(${target} links)
    foreach(link ${links})
      if(NOT link IN_LIST memkit_allowed_${name})
        list(JOIN memkit_allowed_${name} ", " allowed)
        list(APPEND errors "  ${target} links ${link} (it may link only: ${allowed})")
      endif()
    endforeach()
  endforeach()
  if(errors)
    list(JOIN errors "\n" message)
    message(FATAL_ERROR "[memkit_check_layers] a layer links outside its rule "
                        "(cmake/layers.cmake):\n${message}")
  endif()
endfunction()

# The layers a layer may use, directly or through others, by the rule.
function(memkit_layer_closure target out)
  string(REGEX REPLACE "^memkit_" "" name ${target})
  set(closure)
  foreach(allowed ${memkit_allowed_${name}})
    if(allowed MATCHES "^memkit_" AND TARGET ${allowed})
      memkit_layer_closure(${allowed} below)
      list(APPEND closure ${allowed} ${below})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set(${out} ${closure} PARENT_SCOPE)
endfunction()
