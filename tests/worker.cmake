# Suites of worker/: the O and S threads, admission, limits and the loader, cancel, faults,
# shutdown, trace.
# Included from tests/CMakeLists.txt.
chipd_check(check_worker worker_faults.c worker_trace_op.c worker_abandon.c worker_health.c
             worker_limits.c worker_hol.c worker_device.c worker_fixture.c)
target_link_libraries(check_worker PRIVATE chipd_worker)
# the tests' callables (tests/kernels.cmake): a request of one that makes no step
add_dependencies(check_worker tc_good)
target_compile_definitions(check_worker PRIVATE CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}")
