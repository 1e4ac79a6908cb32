# The Vulkan backend (src/backends/vulkan): on when the Vulkan headers and loader
# and glslangValidator are found. Compute shaders (shaders/*.comp) are compiled to
# SPIR-V at build time and embedded in the library as uint32_t arrays.
find_package(Vulkan QUIET)
find_program(MEMKIT_GLSLANG_VALIDATOR glslangValidator)
if(NOT Vulkan_FOUND)
  message(STATUS "memkit: vulkan backend off (no Vulkan headers and loader; Debian: libvulkan-dev)")
elseif(NOT MEMKIT_GLSLANG_VALIDATOR)
  message(STATUS "memkit: vulkan backend off (no glslangValidator; Debian: glslang-tools)")
else()
  message(STATUS "memkit: vulkan backend on (${Vulkan_LIBRARY}, ${MEMKIT_GLSLANG_VALIDATOR})")
  set(memkit_spirv_dir ${PROJECT_BINARY_DIR}/generated/spirv)
  file(MAKE_DIRECTORY ${memkit_spirv_dir})
  file(GLOB memkit_shader_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/shaders/*.comp)
  set(memkit_spirv_headers)
  foreach(shader ${memkit_shader_sources})
    get_filename_component(shader_name ${shader} NAME_WE)
    set(header ${memkit_spirv_dir}/${shader_name}.spv.h)
    add_custom_command(
      OUTPUT ${header}
      COMMAND ${MEMKIT_GLSLANG_VALIDATOR} -V --target-env vulkan1.2 --quiet
              --vn memkit_spirv_${shader_name} -o ${header} ${shader}
      DEPENDS ${shader}
      COMMENT "glslangValidator ${shader_name}.comp"
      VERBATIM)
    list(APPEND memkit_spirv_headers ${header})
  endforeach()
  memkit_add_layer(vulkan SOURCES
    src/backends/vulkan/vulkan_device.cpp src/backends/vulkan/vulkan_kernels.cpp
    src/backends/vulkan/vulkan_memory.cpp src/backends/vulkan/vulkan_queue.cpp
    ${memkit_spirv_headers})
  target_include_directories(memkit_vulkan PRIVATE ${memkit_spirv_dir})
  target_link_libraries(memkit_vulkan PUBLIC memkit_backend PRIVATE Vulkan::Vulkan)
  target_compile_definitions(memkit_vulkan PUBLIC MEMKIT_HAVE_VULKAN=1)
endif()

# The framework examples run on every backend present, Vulkan among them, so they
# are built here (examples/framework_*.cpp, one program each).
if(NOT MEMKIT_EXAMPLES)
  return()
endif()
file(GLOB memkit_framework_examples CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/framework_*.cpp)
foreach(example ${memkit_framework_examples})
  get_filename_component(example_name ${example} NAME_WE)
  add_executable(example_${example_name} ${example})
  target_compile_options(example_${example_name} PRIVATE ${memkit_warnings})
  target_link_libraries(example_${example_name} PRIVATE memkit)
endforeach()
