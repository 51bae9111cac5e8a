# chipctl's suite: the pure formatters and chipd_trace on the wire (unit/check_ctl.c),
# and the chipctl binary against the client fixture's server (unit/ctl_cli.c; no chipd
# needed); unit/ctl_fixture.c holds the samples and the trace/workloads server both use.
# The Prometheus output of the real counter names is checked by promtool when it is
# installed (skipped, 77, else).

chipd_check(check_ctl client_fixture.c hello_fixture.c ctl_fixture.c ctl_cli.c)
target_link_libraries(check_ctl PRIVATE chipctl_core chipd_proto)
target_compile_definitions(check_ctl PRIVATE CHIPCTL_BIN="$<TARGET_FILE:chipctl>")
add_dependencies(check_ctl chipctl)

add_executable(ctl_prom_sample ctl/prom_sample.c)
target_link_libraries(ctl_prom_sample PRIVATE chipctl_core chipd_proto)
add_test(NAME ctl_promtool
         COMMAND ${CHIPD_SKIP_CHECK} sh ${CMAKE_CURRENT_SOURCE_DIR}/ctl/promtool.sh
                 $<TARGET_FILE:ctl_prom_sample>)
set_tests_properties(ctl_promtool PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)

# The bash completion (deploy/bash-completion/chipctl) against a running chipd.
add_test(NAME ctl_completion
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ctl/completion.sh
                 $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl>)
set_tests_properties(ctl_completion PROPERTIES TIMEOUT 60)
