# KopInstall.cmake - what `make install PREFIX=...` (cmake --install) puts
# where, for projects that build operators against libkop:
#
#   lib/libkop.a                    static library (kop::kop_static)
#   lib/libkop.so.0.2.0             shared library, soname libkop.so.0.2 (kop::kop)
#   lib/libkop.so.0.2, libkop.so    links to it (the soname, and -lkop's)
#   include/kop/*.h                 the public headers
#   lib/pkgconfig/kop.pc            pkg-config --cflags --libs kop
#   lib/cmake/kop/kopConfig.cmake   find_package(kop 0.2) and its version file
#   bin/ctf-operator                the CTF operator (component "operator")
#   bin/kop-gen                     the project generator (component "generator";
#                                   tools/kop-gen/CMakeLists.txt)
#
# The soname's number (KOP_SOVERSION, top CMakeLists.txt) is MAJOR.MINOR
# while the version is 0.x, MAJOR from 1.0 on: it changes with every release
# that may break the ABI.
# jansson is a public dependency (the headers use json_t); the others are
# private ones of the library. Included from the top CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KOP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kop)

# The headers move from the source tree to the prefix.
foreach(t kop kop_shared)
  set_property(TARGET ${t} PROPERTY INTERFACE_INCLUDE_DIRECTORIES
               $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
               $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
# Users of the shared library call jansson themselves (json_t in the API).
target_link_libraries(kop_shared INTERFACE PkgConfig::JANSSON)
# kop::kop is the shared library, kop::kop_static the static one.
set_target_properties(kop_shared PROPERTIES EXPORT_NAME kop)
set_target_properties(kop PROPERTIES EXPORT_NAME kop_static)
set_target_properties(kop_deps PROPERTIES EXPORT_NAME deps)

install(TARGETS kop kop_shared kop_deps EXPORT kopTargets COMPONENT libkop
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT libkop
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kop DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT libkop FILES_MATCHING PATTERN "*.h")
install(EXPORT kopTargets NAMESPACE kop:: DESTINATION ${KOP_CMAKE_DIR} COMPONENT libkop)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kopConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kopConfig.cmake INSTALL_DESTINATION ${KOP_CMAKE_DIR})
# 0.x: a minor release may break the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kopConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kopConfig.cmake ${PROJECT_BINARY_DIR}/kopConfigVersion.cmake
        DESTINATION ${KOP_CMAKE_DIR} COMPONENT libkop)

# pkg-config: written at install time, so that the prefix in it is the one
# given to cmake --install --prefix (or make install PREFIX=), not the one
# configured; DESTDIR stages it without changing what it says.
install(CODE "
  set(KOP_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(KOP_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(KOP_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(KOP_PC_VERSION \"${PROJECT_VERSION}\")
  set(pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/kop.pc\")
  message(STATUS \"Installing: \${pc}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/kop.pc.in\" \"\${pc}\" @ONLY)
" COMPONENT libkop)

# The operator, for images and packages (Dockerfile).
if(TARGET ctf-operator)
  install(TARGETS ctf-operator RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT operator)
endif()
