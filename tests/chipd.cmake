# Process-level suites of the supervisor: a real chipd (sim chips) through libchipd.
chipd_check(check_chipd chipd_fixture.c)
target_link_libraries(check_chipd PRIVATE chipd_proto)
target_compile_definitions(check_chipd PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd_sup>")
add_dependencies(check_chipd chipd_sup)
