# Process-level suites of the supervisor: a real chipd (sim chips) through libchipd.
chipd_check(check_chipd chipd_fixture.c chipd_counters.c chipd_abandon.c chipd_clstat.c
            chipd_cancel.c)
# chipd_kernels: the workload tables the "workloads" answer is compared with
target_link_libraries(check_chipd PRIVATE chipd_proto chipd_kernels)
target_compile_definitions(check_chipd PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>")
add_dependencies(check_chipd chipd)
# A chip's health: degraded chips (scheduler gave up or stuck, a fill held past
# --fill-ms), a stalled supervisor, a dead worker's gauges.
chipd_check(check_health chipd_fixture.c)
target_link_libraries(check_health PRIVATE chipd_proto)
target_compile_definitions(check_health PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>"
                           CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}")
add_dependencies(check_health chipd tc_good)
# Per-request limits and the worker's loader: an over-limit request is refused naming
# the limit; a request whose fill takes seconds leaves the worker answering.
chipd_check(check_limits chipd_fixture.c)
target_link_libraries(check_limits PRIVATE chipd_proto)
target_compile_definitions(check_limits PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>")
add_dependencies(check_limits chipd)
# What a client sees when the processes behind its streams die: a dead node
# (node_lost, chipctl submit --count), a request re-queued while the supervisor stalled,
# re-queues to a stuck worker that hold up no other chip.
chipd_check(check_liveness chipd_fixture.c)
target_link_libraries(check_liveness PRIVATE chipd_proto)
target_compile_definitions(check_liveness PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>"
                                                  CHIPCTL_BIN="$<TARGET_FILE:chipctl>")
add_dependencies(check_liveness chipd chipctl)
# Promises of the node's operator ops (trace) as a client reads them.
chipd_check(check_node_ops chipd_fixture.c)
target_link_libraries(check_node_ops PRIVATE chipd_proto)
target_compile_definitions(check_node_ops PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>")
add_dependencies(check_node_ops chipd)

# chipctl against a real chipd: submit, stats --prom through promtool, trace JSON, stop.
add_test(NAME chipctl_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/chipd/cli.sh
                                  $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl>)
set_tests_properties(chipctl_cli PROPERTIES TIMEOUT 180)

# chipd --trace records the whole run: a chipctl trace in the middle of it, a restarted worker.
add_test(NAME chipd_trace_run COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/chipd/trace_run.sh
                                      $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl>)
set_tests_properties(chipd_trace_run PROPERTIES TIMEOUT 180)

# chipctl submit's bytes against a real chipd with the tests' echo callable: --input,
# token payloads and the output as hex, --output FILE, the refusals naming the limit.
add_test(NAME chipctl_data COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/chipd/cli_data.sh
                                   $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl>
                                   $<TARGET_FILE:dc_echo>)
set_tests_properties(chipctl_data PROPERTIES TIMEOUT 180)

# What chipd leaves to others: a detached chipd holds none of its caller's output, the
# runtime directory must be private, trace files 0600, a killed spawner ends chipd (70).
add_test(NAME chipd_hygiene COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/chipd/hygiene.sh
                                    $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl>)
set_tests_properties(chipd_hygiene PROPERTIES TIMEOUT 180)
