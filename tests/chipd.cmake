# Process-level suites of the supervisor: a real chipd (sim chips) through libchipd.
chipd_check(check_chipd chipd_fixture.c chipd_counters.c)
# chipd_kernels: the workload tables the "workloads" answer is compared with
target_link_libraries(check_chipd PRIVATE chipd_proto chipd_kernels)
target_compile_definitions(check_chipd PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>")
add_dependencies(check_chipd chipd)

# chipctl against a real chipd: submit, stats --prom through promtool, trace JSON, stop.
add_test(NAME chipctl_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/chipd/cli.sh
                                  $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl>)
set_tests_properties(chipctl_cli PROPERTIES TIMEOUT 180)
