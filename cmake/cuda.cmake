# The cuda backend (src/backends/cuda), its tests (tests/cuda), the GPU benchmark
# (bench/gpu) and the PyTorch allocator (integrations/pytorch). Off, with the reason
# printed, when the CUDA toolkit is missing or MEMKIT_CUDA is OFF.
#
# The backend is host code over the CUDA runtime: no device code, so nvcc is not
# needed and no GPU architecture is compiled. The runtime is linked statically and
# the driver is reached through the runtime's entry points (not linked), so one
# build runs on the GPU machine and starts, reporting "no device", on machines with
# the toolkit but no driver.
option(MEMKIT_CUDA "Build the cuda backend when the CUDA toolkit is found" ON)
if(NOT MEMKIT_CUDA)
  message(STATUS "memkit: cuda backend off (MEMKIT_CUDA=OFF)")
  return()
endif()
if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart_static)
  message(STATUS "memkit: cuda backend off (no CUDA toolkit found; set CUDAToolkit_ROOT)")
  return()
endif()
if(CUDAToolkit_VERSION VERSION_LESS 12.5)
  message(STATUS "memkit: cuda backend off (CUDA ${CUDAToolkit_VERSION} < 12.5: "
                 "cudaGetDriverEntryPointByVersion is needed)")
  return()
endif()
message(STATUS "memkit: cuda backend on (CUDA ${CUDAToolkit_VERSION} at ${CUDAToolkit_LIBRARY_DIR})")

memkit_add_layer(cuda SOURCES
  src/backends/cuda/cuda_backend.cpp src/backends/cuda/cuda_peers.cpp
  src/backends/cuda/cuda_queues.cpp src/backends/cuda/cuda_sharing.cpp
  src/backends/cuda/cuda_transfers.cpp src/backends/cuda/cuda_virtual_memory.cpp
  src/backends/cuda/driver_api.cpp)
# memkit/backends/cuda.hpp does not include the toolkit's headers: the runtime is
# linked, not part of the interface (programs that call CUDA themselves link it).
target_link_libraries(memkit_cuda PUBLIC memkit_backend PRIVATE CUDA::cudart_static)
target_compile_definitions(memkit_cuda PUBLIC MEMKIT_HAVE_CUDA=1)

# The drop-in allocator for PyTorch's CUDAPluggableAllocator.
add_library(memkit_torch SHARED ${PROJECT_SOURCE_DIR}/integrations/pytorch/memkit_torch.cpp
            ${PROJECT_SOURCE_DIR}/integrations/pytorch/torch_abi.cpp)
target_compile_options(memkit_torch PRIVATE ${memkit_warnings})
target_link_libraries(memkit_torch PRIVATE memkit CUDA::cudart_static)
set_target_properties(memkit_torch PROPERTIES CXX_VISIBILITY_PRESET hidden)
# Keep the static runtime's symbols inside: the process has PyTorch's own runtime.
target_link_options(memkit_torch PRIVATE -Wl,--exclude-libs,ALL)

# The GPU benchmark: memkit beside PyTorch's caching allocator (when a PyTorch with
# its C++ headers is found by python3) and cudaMallocAsync, in one process.
if(MEMKIT_BENCH)
  add_executable(memkit_gpu_bench ${PROJECT_SOURCE_DIR}/bench/gpu/gpu_allocators_bench.cpp)
  target_include_directories(memkit_gpu_bench PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(memkit_gpu_bench PRIVATE ${memkit_warnings})
  target_link_libraries(memkit_gpu_bench PRIVATE memkit CUDA::cudart_static)
  # libc10_cuda brings its own shared runtime: do not export ours over it.
  target_link_options(memkit_gpu_bench PRIVATE -Wl,--exclude-libs,ALL)
  set(MEMKIT_TORCH_DIR "" CACHE PATH "PyTorch package folder (with include/ and lib/) for the GPU benchmark")
  if(NOT MEMKIT_TORCH_DIR)
    execute_process(
      COMMAND python3 -c "import torch, os; print(os.path.dirname(torch.__file__))"
      OUTPUT_VARIABLE memkit_torch_found OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE memkit_torch_result ERROR_QUIET)
    if(memkit_torch_result EQUAL 0)
      set(MEMKIT_TORCH_DIR ${memkit_torch_found})
    endif()
  endif()
  if(MEMKIT_TORCH_DIR AND EXISTS ${MEMKIT_TORCH_DIR}/include/c10/cuda/CUDACachingAllocator.h)
    find_library(memkit_c10 c10 PATHS ${MEMKIT_TORCH_DIR}/lib NO_DEFAULT_PATH)
    find_library(memkit_c10_cuda c10_cuda PATHS ${MEMKIT_TORCH_DIR}/lib NO_DEFAULT_PATH)
    message(STATUS "memkit: GPU benchmark compares with PyTorch at ${MEMKIT_TORCH_DIR}")
    # PyTorch's headers are not warning-clean under our flags: include them as system.
    target_include_directories(memkit_gpu_bench SYSTEM PRIVATE ${MEMKIT_TORCH_DIR}/include)
    target_compile_definitions(memkit_gpu_bench PRIVATE MEMKIT_BENCH_TORCH=1)
    target_link_libraries(memkit_gpu_bench PRIVATE ${memkit_c10_cuda} ${memkit_c10})
    set_target_properties(memkit_gpu_bench PROPERTIES BUILD_RPATH ${MEMKIT_TORCH_DIR}/lib)
  else()
    message(STATUS "memkit: GPU benchmark without PyTorch (python3 has no torch with C++ headers)")
  endif()
endif()

# The all-reduce benchmark over several GPUs (bench/multi_gpu): NCCL is loaded at
# run time, so only its header is needed to build.
if(MEMKIT_BENCH)
  find_path(MEMKIT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(MEMKIT_NCCL_INCLUDE_DIR)
    message(STATUS "memkit: NCCL benchmark on (nccl.h in ${MEMKIT_NCCL_INCLUDE_DIR}; libnccl is loaded at run time)")
    add_executable(memkit_nccl_bench ${PROJECT_SOURCE_DIR}/bench/multi_gpu/nccl_allreduce_bench.cpp)
    target_include_directories(memkit_nccl_bench PRIVATE ${PROJECT_SOURCE_DIR}/src ${MEMKIT_NCCL_INCLUDE_DIR})
    target_compile_options(memkit_nccl_bench PRIVATE ${memkit_warnings})
    target_link_libraries(memkit_nccl_bench PRIVATE memkit CUDA::cudart_static ${CMAKE_DL_LIBS})
  else()
    message(STATUS "memkit: NCCL benchmark off (no nccl.h under ${CUDAToolkit_INCLUDE_DIRS})")
  endif()
endif()
