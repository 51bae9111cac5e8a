# packaging.cmake - the Debian packages (CPack's DEB generator, one package per install
# component), included when CHIPD_DEB is on. deploy/package.sh configures a Release
# tree with CMAKE_INSTALL_PREFIX=/usr and runs cpack; docs/operations.md says what
# each package installs where.
#
#   component       package         holds
#   chipd           chipd           chipd, chipctl, man pages, systemd units, Slurm job
#                                   scripts, Prometheus rules, bash completion
#   libchipd0       libchipd0       libchipd.so.0 (the runtime library)
#   libchipd_dev    libchipd-dev    chipd.h, libchipd.a, libchipd.so, chipd.pc
#   python3_chipd   python3-chipd   the Python client (ctypes over libchipd.so.0)
include(GNUInstallDirs)
set(chipd_deb_dir ${PROJECT_SOURCE_DIR}/deploy/debian)
set(chipd_deb_out ${PROJECT_BINARY_DIR}/deb)
set(chipd_deb_version ${PROJECT_VERSION}-1)

# Every package's /usr/share/doc/PACKAGE: the copyright and the Debian changelog.
chipd_gzip(${chipd_deb_dir}/changelog ${chipd_deb_out}/changelog.Debian.gz)
foreach(pair chipd:chipd libchipd0:libchipd0 libchipd_dev:libchipd-dev
        python3_chipd:python3-chipd)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${chipd_deb_dir}/copyright ${chipd_deb_out}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
endforeach()

# The units run the installed chipd: their ExecStart says /usr/local/bin (the manual
# install of docs/operations.md), the package's says this prefix's bin.
foreach(unit systemd/chipd.service systemd/chipd@.service prometheus/chipd-export.service)
  get_filename_component(name ${unit} NAME)
  file(READ ${PROJECT_SOURCE_DIR}/deploy/${unit} text)
  string(REGEX REPLACE "\nExecStart=/usr/local/bin/" "\nExecStart=${CMAKE_INSTALL_FULL_BINDIR}/"
         text "${text}")
  file(GENERATE OUTPUT ${chipd_deb_out}/units/${name} CONTENT "${text}")
  install(FILES ${chipd_deb_out}/units/${name} DESTINATION /lib/systemd/system COMPONENT chipd)
endforeach()

install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/slurm/chipd.sbatch
        ${PROJECT_SOURCE_DIR}/deploy/slurm/chipd-multinode.sbatch
        DESTINATION ${CMAKE_INSTALL_DATADIR}/chipd/slurm COMPONENT chipd)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/prometheus/chipd.rules.yml
        ${PROJECT_SOURCE_DIR}/deploy/prometheus/chipd.rules.test.yml
        ${PROJECT_SOURCE_DIR}/deploy/prometheus/README.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/chipd/prometheus COMPONENT chipd)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/bash-completion/chipctl
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT chipd)

# The Python client: the package's modules (no __pycache__ of the tree's test runs;
# the postinst byte-compiles them, the prerm removes what it made).
file(GLOB chipd_python_modules ${PROJECT_SOURCE_DIR}/proto/python/chipd/*.py)
install(FILES ${chipd_python_modules} DESTINATION /usr/lib/python3/dist-packages/chipd
        COMPONENT python3_chipd)

# What the packages hold, built (deploy/package.sh builds this target alone: the tests
# and benchmarks are no package's).
get_property(chipd_gz_targets GLOBAL PROPERTY CHIPD_GZ_TARGETS)
add_custom_target(chipd_deb_payload)
add_dependencies(chipd_deb_payload chipd chipctl libchipd libchipd_static
                 ${CHIPD_BUILTIN_CALLABLE_TARGETS} ${chipd_gz_targets})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME chipd)
set(CPACK_PACKAGE_VENDOR "the chipd developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "chipd developers <chipd@lists.example.org>")
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL chipd libchipd0 libchipd_dev python3_chipd)
# Depends on the runtime libraries from what the ELF files link (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libchipd0's shlibs file (only it holds a shared library): what links libchipd.so.0
# depends on libchipd0 of this version or later. With it comes the ldconfig trigger
# (deploy/debian/libchipd0/triggers); CPack 3.25 also writes a postinst and postrm
# that run ldconfig (lintian: maintscript-calls-ldconfig, a warning; harmless).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# 0644 control files and 0755 maintainer scripts, whatever the tree's modes.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
    GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

set(CPACK_DEBIAN_CHIPD_PACKAGE_NAME chipd)
set(CPACK_DEBIAN_CHIPD_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_CHIPD_PACKAGE_DEPENDS adduser)
set(CPACK_DEBIAN_CHIPD_PACKAGE_CONTROL_EXTRA
    ${chipd_deb_dir}/chipd/postinst ${chipd_deb_dir}/chipd/prerm ${chipd_deb_dir}/chipd/postrm)
set(CPACK_DEBIAN_CHIPD_DESCRIPTION "node supervisor of GPU chip workers
chipd keeps one worker process per GPU (or simulated chip) on a node, takes
requests from clients through shared memory and streams their tokens back.
This package holds chipd, its command-line client chipctl, the systemd units
(installed, not enabled), Slurm job scripts and Prometheus alert rules.")

set(CPACK_DEBIAN_LIBCHIPD0_PACKAGE_NAME libchipd0)
set(CPACK_DEBIAN_LIBCHIPD0_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBCHIPD0_PACKAGE_CONTROL_EXTRA ${chipd_deb_dir}/libchipd0/triggers)
set(CPACK_DEBIAN_LIBCHIPD0_DESCRIPTION "client library of the chipd node runtime
libchipd connects a program to the chipd supervisor of its node: it submits
requests, reads their token streams, cancels them and reads the node's status
and counters. This package holds the shared library.")

set(CPACK_DEBIAN_LIBCHIPD_DEV_PACKAGE_NAME libchipd-dev)
set(CPACK_DEBIAN_LIBCHIPD_DEV_PACKAGE_SECTION libdevel)
# chipd.pc requires msgpack (privately: the static library links it).
set(CPACK_DEBIAN_LIBCHIPD_DEV_PACKAGE_DEPENDS
    "libchipd0 (= ${chipd_deb_version}), libmsgpack-dev")
set(CPACK_DEBIAN_LIBCHIPD_DEV_DESCRIPTION "client library of the chipd node runtime (development files)
libchipd connects a program to the chipd supervisor of its node. This package
holds the header chipd.h, the static library and the pkg-config file chipd.pc.")

set(CPACK_DEBIAN_PYTHON3_CHIPD_PACKAGE_NAME python3-chipd)
set(CPACK_DEBIAN_PYTHON3_CHIPD_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON3_CHIPD_PACKAGE_ARCHITECTURE all)
# ctypes mirrors chipd.h's structs: the libchipd0 of this upstream version (any
# Debian revision).
set(CPACK_DEBIAN_PYTHON3_CHIPD_PACKAGE_DEPENDS
    "python3:any, libchipd0 (>= ${chipd_deb_version}), libchipd0 (<< ${PROJECT_VERSION}.1~)")
set(CPACK_DEBIAN_PYTHON3_CHIPD_PACKAGE_CONTROL_EXTRA
    ${chipd_deb_dir}/python3-chipd/postinst ${chipd_deb_dir}/python3-chipd/prerm)
set(CPACK_DEBIAN_PYTHON3_CHIPD_DESCRIPTION "Python client of the chipd node runtime
The chipd module submits requests to the node's chipd supervisor and iterates
over their token streams, in pure Python over libchipd (ctypes).")

include(CPack)
