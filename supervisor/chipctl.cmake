# chipctl, the mailbox CLI: included by supervisor/CMakeLists.txt.
#
# It uses libchipd only (chipd.h): linked against the self-contained static libchipd
# (chipd_static), so the installed binary needs no library path. Everything but main
# is in chipctl_core, which the unit suite (tests/ctl.cmake) links to test the pure
# formatters without a running chipd.
set(CHIPCTL_DIR ${CMAKE_CURRENT_LIST_DIR})

add_library(chipctl_core STATIC
            ${CHIPCTL_DIR}/ctl_util.c ${CHIPCTL_DIR}/ctl_format.c ${CHIPCTL_DIR}/ctl_prom.c
            ${CHIPCTL_DIR}/ctl_cmds.c ${CHIPCTL_DIR}/ctl_submit.c ${CHIPCTL_DIR}/ctl_top.c
            ${CHIPCTL_DIR}/ctl_trace.c ${CHIPCTL_DIR}/ctl_tracesum.c
            ${CHIPCTL_DIR}/ctl_export.c)
# chipd.h only: the directory holds proto's private headers too, which chipctl does
# not include.
target_include_directories(chipctl_core PUBLIC ${CHIPCTL_DIR} ${PROJECT_SOURCE_DIR}/proto)
target_link_libraries(chipctl_core PUBLIC m)

add_executable(chipctl ${CHIPCTL_DIR}/ctl_main.c)
target_compile_definitions(chipctl PRIVATE CHIPD_VERSION="${PROJECT_VERSION}")
target_link_libraries(chipctl PRIVATE chipctl_core chipd_static PkgConfig::MSGPACK
                      Threads::Threads rt)

include(GNUInstallDirs)
install(TARGETS chipctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/docs/chipctl.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
