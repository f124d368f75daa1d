# Install rules and the package files that let other projects use an installed warden:
#
#   find_package(warden 0.1 REQUIRED)                    # warden::warden: all installed
#   find_package(warden 0.1 REQUIRED COMPONENTS redis)   # warden::core + warden::redis
#   pkg-config --cflags --libs warden warden-redis       # everything else
#
# Every component is a library of its own: libwarden (the core, warden::core, warden.pc)
# and one libwarden-<engine> per engine of WARDEN_ENGINES (warden::<engine>,
# warden-<engine>.pc), each with its own export file, so a -dev package per component
# can install its own. The object libraries they are built from are linked PRIVATE into
# the shared libraries, which already contain their code, so the exported targets
# neither name nor need them.

include(CMakePackageConfigHelpers)

set(WARDEN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/warden)

# Every public header uses C++20 (std::stop_token, defaulted operator==), so the C++ level
# is part of the library's interface: a consumer on the compiler's default level would
# fail inside our headers instead of getting a clear requirement.
target_compile_features(warden_core_library INTERFACE cxx_std_20)

# warden_install_component(TARGET COMPONENT RUNTIME DEVELOPMENT) — the library of a
# component in its runtime install component and its link, export file and pkg-config
# file in its development one.
function(warden_install_component target component runtime development)
  install(TARGETS ${target} EXPORT warden-${component}-targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
      COMPONENT ${runtime} NAMELINK_COMPONENT ${development}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${development}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${runtime})
  install(EXPORT warden-${component}-targets NAMESPACE warden::
    FILE warden-${component}-targets.cmake DESTINATION ${WARDEN_CMAKE_DIR}
    COMPONENT ${development})
endfunction()

warden_install_component(warden_core_library core warden_runtime warden_development)
foreach(engine IN LISTS WARDEN_ENGINES)
  warden_install_component(warden_${engine} ${engine} warden_${engine}_runtime
                           warden_${engine}_development)
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/warden
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT warden_development
  FILES_MATCHING PATTERN "*.h")
# version.h is generated at configure time, so it lives in the build tree.
install(FILES ${PROJECT_BINARY_DIR}/include/warden/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/warden COMPONENT warden_development)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wardenConfig.cmake.in
  ${PROJECT_BINARY_DIR}/wardenConfig.cmake INSTALL_DESTINATION ${WARDEN_CMAKE_DIR})
# SameMajorVersion matches the SOVERSION (the major version): a request for 1.x never
# picks up a 0.y library. While warden is 0.x it also accepts any newer 0.y.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wardenConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wardenConfig.cmake
  ${PROJECT_BINARY_DIR}/wardenConfigVersion.cmake
  DESTINATION ${WARDEN_CMAKE_DIR} COMPONENT warden_development)

# warden.pc finds the prefix from its own location (${pcfiledir}), so an install with
# `cmake --install --prefix DIR` works without reconfiguring. A /usr install keeps plain
# absolute paths, which pkg-config recognises as system directories and leaves out.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}"
   OR CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(WARDEN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(WARDEN_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(WARDEN_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH WARDEN_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" WARDEN_PC_UP "${WARDEN_PC_UP}")
  set(WARDEN_PC_PREFIX "\${pcfiledir}/${WARDEN_PC_UP}")
  set(WARDEN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(WARDEN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/warden.pc.in ${PROJECT_BINARY_DIR}/warden.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/warden.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT warden_development)
foreach(WARDEN_PC_ENGINE IN LISTS WARDEN_ENGINES)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/warden-engine.pc.in
                 ${PROJECT_BINARY_DIR}/warden-${WARDEN_PC_ENGINE}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/warden-${WARDEN_PC_ENGINE}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
    COMPONENT warden_${WARDEN_PC_ENGINE}_development)
endforeach()

# Installed programs find libwarden next to them ($ORIGIN/../lib), an engine's library
# the core beside it ($ORIGIN) and the warden command's engine modules their engine's
# library two levels up (<libdir>/warden/engines), unless the libraries go to a
# directory the loader searches anyway (e.g. /usr/lib), where an RPATH would only get in
# the way of packagers.
set(warden_system_libdirs ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES}
  ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
if(NOT "${CMAKE_INSTALL_FULL_LIBDIR}" IN_LIST warden_system_libdirs)
  file(RELATIVE_PATH warden_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  function(warden_set_install_rpath dir)
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type STREQUAL "EXECUTABLE")
        set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/${warden_bin_to_lib}")
      elseif(type STREQUAL "SHARED_LIBRARY")
        set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
      elseif(type STREQUAL "MODULE_LIBRARY")
        set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
      endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    foreach(subdir IN LISTS subdirs)
      warden_set_install_rpath(${subdir})
    endforeach()
  endfunction()
  warden_set_install_rpath(${PROJECT_SOURCE_DIR}/src)
endif()
