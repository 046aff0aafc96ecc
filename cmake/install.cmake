# `cmake --install build --prefix P` (docs/embedding.md): the prefixsim binary in P/bin, the files it
# reads at run time in P/share/prefixsim (found there relative to the binary, sim/util/data_dir.h),
# the public headers in P/include/prefixsim, and the static core library with a CMake package
# exporting prefixsim::core (find_package(prefixsim)).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# sim/util/data_dir.cc looks in <dir of the binary>/../share/prefixsim, so these two stay fixed
# whatever GNUInstallDirs would choose.
set(PREFIXSIM_INSTALL_BINDIR bin)
set(PREFIXSIM_INSTALL_DATADIR share/prefixsim)
set(PREFIXSIM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/prefixsim)

set_target_properties(prefixsim_core PROPERTIES EXPORT_NAME core)
install(TARGETS prefixsim RUNTIME DESTINATION ${PREFIXSIM_INSTALL_BINDIR})
# Its include directory is set on the target ($<INSTALL_INTERFACE:include>, CMakeLists.txt).
install(TARGETS prefixsim_core EXPORT prefixsimTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/prefixsim DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs DESTINATION ${PREFIXSIM_INSTALL_DATADIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/slurm/sweep.sbatch
        DESTINATION ${PREFIXSIM_INSTALL_DATADIR}/scripts/slurm)

install(EXPORT prefixsimTargets NAMESPACE prefixsim:: DESTINATION ${PREFIXSIM_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/prefixsimConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/prefixsimConfig.cmake
                              INSTALL_DESTINATION ${PREFIXSIM_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/prefixsimConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/prefixsimConfig.cmake
              ${PROJECT_BINARY_DIR}/prefixsimConfigVersion.cmake
        DESTINATION ${PREFIXSIM_INSTALL_CMAKEDIR})
