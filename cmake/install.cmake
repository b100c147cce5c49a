# Install rules, included by the top-level CMakeLists.txt after the targets exist.
#
#   cmake --install build [--prefix DIR]
#     bin/kztts                                  the CLI (links the library statically)
#     include/kztts.h                            the only public header
#     LIBDIR/libkztts.a, libkztts.so.X.Y.Z       the library; the shared one exports only the
#                                                kztts.h functions (hidden visibility)
#     LIBDIR/pkgconfig/kztts.pc                  pkg-config: cflags, libs, the static deps
#     LIBDIR/cmake/kztts/kzttsConfig.cmake       find_package(kztts): kztts::kztts (shared),
#       kzttsConfigVersion.cmake, kzttsTargets*  kztts::kztts_static
#
# Both package files find the prefix from where they lie, so an installed tree can be moved
# (or installed with --prefix other than CMAKE_INSTALL_PREFIX). scripts/test-install.sh
# installs into a temporary prefix and builds a small program against it both ways.
include(CMakePackageConfigHelpers)

set(KZ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kztts)
set_target_properties(kztts_shared PROPERTIES EXPORT_NAME kztts)
set_target_properties(kztts_static PROPERTIES EXPORT_NAME kztts_static)

install(TARGETS kztts_shared kztts_static EXPORT kzttsTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kztts RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/kztts.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# CMake package: the exported targets, a config that finds the static library's
# dependencies again (pkg-config modules, threads), and a version file. Before 1.0 a
# minor version may break the API (kztts.h), so only the same major.minor matches.
install(EXPORT kzttsTargets NAMESPACE kztts:: DESTINATION ${KZ_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kzttsConfig.cmake.in
    ${PROJECT_BINARY_DIR}/kzttsConfig.cmake INSTALL_DESTINATION ${KZ_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kzttsConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kzttsConfig.cmake ${PROJECT_BINARY_DIR}/kzttsConfigVersion.cmake
        DESTINATION ${KZ_CMAKE_DIR})

# pkg-config: the prefix relative to the .pc file's own folder (${pcfiledir}), unless
# LIBDIR was given as an absolute path.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(KZ_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
    set(KZ_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
    file(RELATIVE_PATH KZ_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
    set(KZ_PC_PREFIX "\${pcfiledir}/${KZ_PC_UP}")
    set(KZ_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(KZ_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
    set(KZ_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/kztts.pc.in ${PROJECT_BINARY_DIR}/kztts.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kztts.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
