# iceoryx.cmake - the optional iceoryx peer of `chipbench mailbox` (peer_iceoryx.c).
# Included from tests/bench/CMakeLists.txt. Sets, for the chipbench target:
#   CHIPD_BENCH_ICEORYX_SOURCES  extra sources (empty without iceoryx)
#   CHIPD_BENCH_ICEORYX_LIBS     libraries to link (empty without iceoryx)
#   CHIPD_BENCH_ICEORYX_DEFS     compile definitions (empty without iceoryx)
# Debian: libiceoryx-binding-c-dev to build; package iceoryx (iox-roudi) to run.
set(CHIPD_BENCH_ICEORYX_SOURCES "")
set(CHIPD_BENCH_ICEORYX_LIBS "")
set(CHIPD_BENCH_ICEORYX_DEFS "")

find_package(iceoryx_binding_c CONFIG QUIET)

if(iceoryx_binding_c_FOUND AND TARGET iceoryx_binding_c::iceoryx_binding_c)
  # The binding is C++ inside. Its imported target already lists stdc++ and pthread in
  # INTERFACE_LINK_LIBRARIES (Debian 2.0.3); name them again so that the C-only link
  # line of chipbench keeps working should a packaging drop them. The include dirs of
  # an imported target are SYSTEM by default, which keeps -Wstrict-prototypes quiet
  # about `void iox_runtime_shutdown();` in runtime.h without weakening our flags;
  # the property below makes that explicit.
  set_property(TARGET iceoryx_binding_c::iceoryx_binding_c PROPERTY SYSTEM TRUE)
  find_package(Threads REQUIRED)
  set(CHIPD_BENCH_ICEORYX_SOURCES ${CMAKE_CURRENT_LIST_DIR}/peer_iceoryx.c
                                   ${CMAKE_CURRENT_LIST_DIR}/iox_roudi.c)
  set(CHIPD_BENCH_ICEORYX_LIBS iceoryx_binding_c::iceoryx_binding_c stdc++ Threads::Threads)
  set(CHIPD_BENCH_ICEORYX_DEFS CHIPD_HAVE_ICEORYX=1)
  find_program(CHIPD_IOX_ROUDI iox-roudi)
  if(NOT CHIPD_IOX_ROUDI)
    message(STATUS "chipbench: iceoryx ${iceoryx_binding_c_VERSION} found, but no "
                   "iox-roudi on PATH (Debian package iceoryx): the iceoryx peer will "
                   "report itself skipped at run time")
  else()
    message(STATUS "chipbench: iceoryx ${iceoryx_binding_c_VERSION} peer enabled "
                   "(${CHIPD_IOX_ROUDI})")
  endif()
else()
  message(STATUS "chipbench: iceoryx_binding_c not found (Debian package "
                 "libiceoryx-binding-c-dev): the iceoryx peer will be reported as skipped")
endif()
