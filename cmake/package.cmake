# The Debian packages (`make package`, CPack's DEB generator) and what only they need:
#
#   libwarden0              the core library (mem://, warden://)
#   libwarden-dev           headers, CMake package, pkg-config file of the core
#   libwarden-<engine>0     one per engine of WARDEN_ENGINES: its library and the warden
#                           command's module for it (<libdir>/warden/engines/<engine>.so)
#   libwarden-<engine>-dev  its CMake export file and pkg-config file
#   warden                  the `warden` command (the core; engines come as modules)
#   wardend        the lock server, its systemd unit, /etc/warden/wardend.conf, its
#                  system user (created by the package's postinst)
#
# Both programs get a man page made from their --help by help2man. The unit and the
# config file are installed by plain `cmake --install` too, under the prefix, so the
# staging install checks these rules on every run; the package preset puts them at
# /usr/lib/systemd/system and /etc/warden (CMAKE_INSTALL_SYSCONFDIR=/etc).

# lib/systemd/system under the prefix: systemd reads /usr/lib/systemd/system and
# /usr/local/lib/systemd/system (the multiarch libdir is not where it looks).
set(WARDEN_SYSTEMD_UNIT_DIR "lib/systemd/system"
    CACHE STRING "where wardend.service is installed (relative: under the prefix)")

install(FILES ${PROJECT_SOURCE_DIR}/packaging/wardend.service
  DESTINATION ${WARDEN_SYSTEMD_UNIT_DIR} COMPONENT warden_server)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/wardend.conf
  DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/warden COMPONENT warden_server)

# --- man pages ---
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(warden_man_dir ${PROJECT_BINARY_DIR}/man)
  # A man page for `target`, installed as NAME.1.gz in `component`; `summary` is its NAME line.
  function(warden_man_page target name summary component)
    set(page ${warden_man_dir}/${name}.1.gz)
    add_custom_command(OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${warden_man_dir}
      COMMAND ${HELP2MAN} --no-info --section=1 --name=${summary}
              --output=${warden_man_dir}/${name}.1 $<TARGET_FILE:${target}>
      # -n: no timestamp or file name in the archive, so rebuilds give the same bytes.
      COMMAND gzip -9nf ${warden_man_dir}/${name}.1
      DEPENDS ${target} VERBATIM)
    add_custom_target(${name}_man ALL DEPENDS ${page})
    install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ${component})
  endfunction()
  warden_man_page(wardend wardend "warden's lock server" warden_server)
  if(WARDEN_BUILD_CLI)
    warden_man_page(warden_cli warden "distributed locks with fencing tokens, from the shell"
                    warden_cli)
  endif()
else()
  message(STATUS "help2man not found: no man pages (scripts/install-deps.sh installs it)")
endif()

# --- CPack: one .deb per component ---
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME warden)
set(CPACK_PACKAGE_VENDOR warden)
set(CPACK_PACKAGE_CONTACT "warden maintainers <warden@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL warden_runtime warden_development warden_cli warden_server)
foreach(engine IN LISTS WARDEN_ENGINES)
  list(APPEND CPACK_COMPONENTS_ALL warden_${engine}_runtime warden_${engine}_development)
endforeach()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# Dependencies on Debian's libraries come from dpkg-shlibdeps; between warden's own
# packages, from the component dependencies below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
# The programs link libwarden.so.0, which dpkg-shlibdeps finds in the build tree (it is
# not installed on the building machine) and which libwarden0 declares in its shlibs.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/src)
set(CPACK_DEBIAN_WARDEN_RUNTIME_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_WARDEN_RUNTIME_PACKAGE_NAME libwarden0)
set(CPACK_DEBIAN_WARDEN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_WARDEN_DEVELOPMENT_PACKAGE_NAME libwarden-dev)
set(CPACK_DEBIAN_WARDEN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_WARDEN_CLI_PACKAGE_NAME warden)
set(CPACK_DEBIAN_WARDEN_SERVER_PACKAGE_NAME wardend)
set(CPACK_COMPONENT_WARDEN_DEVELOPMENT_DEPENDS warden_runtime)
set(CPACK_COMPONENT_WARDEN_CLI_DEPENDS warden_runtime)
set(CPACK_COMPONENT_WARDEN_SERVER_DEPENDS warden_runtime)
# The command speaks every engine whose package is installed beside it.
set(warden_engine_packages)
foreach(engine IN LISTS WARDEN_ENGINES)
  string(TOUPPER ${engine} ENGINE)
  set(CPACK_DEBIAN_WARDEN_${ENGINE}_RUNTIME_PACKAGE_NAME libwarden-${engine}0)
  set(CPACK_DEBIAN_WARDEN_${ENGINE}_RUNTIME_PACKAGE_SECTION libs)
  set(CPACK_DEBIAN_WARDEN_${ENGINE}_RUNTIME_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_WARDEN_${ENGINE}_DEVELOPMENT_PACKAGE_NAME libwarden-${engine}-dev)
  set(CPACK_DEBIAN_WARDEN_${ENGINE}_DEVELOPMENT_PACKAGE_SECTION libdevel)
  set(CPACK_COMPONENT_WARDEN_${ENGINE}_RUNTIME_DEPENDS warden_runtime)
  set(CPACK_COMPONENT_WARDEN_${ENGINE}_DEVELOPMENT_DEPENDS warden_${engine}_runtime
      warden_development)
  list(APPEND warden_engine_packages libwarden-${engine}0)
endforeach()
if(warden_engine_packages)
  string(REPLACE ";" ", " CPACK_DEBIAN_WARDEN_CLI_PACKAGE_SUGGESTS "${warden_engine_packages}")
endif()
# <warden/asio.h> is for programs that use asio: the header-only library is theirs to have.
set(CPACK_DEBIAN_WARDEN_DEVELOPMENT_PACKAGE_SUGGESTS libasio-dev)
set(CPACK_DEBIAN_WARDEN_SERVER_PACKAGE_DEPENDS adduser)
set(warden_deb_scripts ${PROJECT_SOURCE_DIR}/packaging/deb/wardend)
set(CPACK_DEBIAN_WARDEN_SERVER_PACKAGE_CONTROL_EXTRA
    ${warden_deb_scripts}/postinst ${warden_deb_scripts}/prerm ${warden_deb_scripts}/postrm
    ${warden_deb_scripts}/conffiles)
set(CPACK_DEBIAN_WARDEN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
