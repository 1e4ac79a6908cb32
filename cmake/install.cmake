# `cmake --install build [--prefix P]`: the layers, libmemkit.so, the public headers,
# the CMake package (find_package(memkit)), the pkg-config file and the tool.
include(CMakePackageConfigHelpers)

set(memkit_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/memkit)
get_property(memkit_installed_layers GLOBAL PROPERTY memkit_layers)
install(TARGETS ${memkit_installed_layers} memkit memkit_shared
  EXPORT memkit-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET memkit_cli)
  install(TARGETS memkit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY include/memkit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/memkit/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/memkit)

install(EXPORT memkit-targets NAMESPACE memkit:: DESTINATION ${memkit_cmake_dir})
set(memkit_have_cuda OFF)
if(TARGET memkit_cuda)
  set(memkit_have_cuda ON)
endif()
set(memkit_have_vulkan OFF)
if(TARGET memkit_vulkan)
  set(memkit_have_vulkan ON)
endif()
configure_package_config_file(cmake/memkit-config.cmake.in
  ${PROJECT_BINARY_DIR}/memkit-config.cmake INSTALL_DESTINATION ${memkit_cmake_dir})
# Before 1.0 a minor version may change the API: only the same minor version matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/memkit-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/memkit-config.cmake
              ${PROJECT_BINARY_DIR}/memkit-config-version.cmake
  DESTINATION ${memkit_cmake_dir})

# The pkg-config file finds the prefix from its own place, so the package can be
# installed under any --prefix.
file(RELATIVE_PATH memkit_pc_prefix_from_pcfiledir
  /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/memkit.pc.in ${PROJECT_BINARY_DIR}/memkit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/memkit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
