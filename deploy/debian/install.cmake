# install.cmake - helpers of the install rules, included before the subdirectories.
#
# CHIPD_DEB (deploy/package.sh turns it on) lays files out as Debian packages want them:
# man pages gzipped (gzip -n: no name or timestamp inside, so the package is
# reproducible), and the Debian-only files of packaging.cmake.

# chipd_gzip(SRC OUT): OUT (in the binary tree) is SRC gzipped at build time.
function(chipd_gzip src out)
  get_filename_component(name ${out} NAME)
  add_custom_command(OUTPUT ${out}
                     COMMAND gzip -9nc ${src} > ${out}
                     DEPENDS ${src} VERBATIM)
  string(MAKE_C_IDENTIFIER "chipd_gz_${name}" target)
  add_custom_target(${target} ALL DEPENDS ${out})
  set_property(GLOBAL APPEND PROPERTY CHIPD_GZ_TARGETS ${target})
endfunction()

# chipd_install_man(PAGE SECTION): the man page into the chipd component.
function(chipd_install_man page section)
  include(GNUInstallDirs)
  if(CHIPD_DEB)
    get_filename_component(name ${page} NAME)
    chipd_gzip(${page} ${CMAKE_CURRENT_BINARY_DIR}/${name}.gz)
    set(page ${CMAKE_CURRENT_BINARY_DIR}/${name}.gz)
  endif()
  install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT chipd)
endfunction()
