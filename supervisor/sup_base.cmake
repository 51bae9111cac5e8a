# The supervisor's self-contained parts: configuration (flags, CHIPD_*, the
# scheduler's environment), the one-line log and readiness notification. chipd links
# it; so do their unit suites (tests/supervisor.cmake). Included from
# supervisor/CMakeLists.txt.
add_library(chipd_sup_base STATIC ${CMAKE_CURRENT_LIST_DIR}/sup_config.c
            ${CMAKE_CURRENT_LIST_DIR}/sup_log.c ${CMAKE_CURRENT_LIST_DIR}/sup_notify.c)
target_include_directories(chipd_sup_base PUBLIC ${CMAKE_CURRENT_LIST_DIR})
# chipd_proto: chipd.h, proto_node_instance, shm_region_name (through chipd_shm);
# chipd_kernels: dev_kind_parse of device.h.
target_link_libraries(chipd_sup_base PUBLIC chipd_proto chipd_kernels PkgConfig::LIBBSD)
target_compile_definitions(chipd_sup_base PUBLIC "CHIPD_VERSION=\"${PROJECT_VERSION}\"")
