# Suites of worker/: the O and S threads, admission, limits and the loader, cancel, faults,
# shutdown, trace.
# Included from tests/CMakeLists.txt.
chipd_check(check_worker worker_faults.c worker_trace_op.c worker_abandon.c worker_health.c
             worker_limits.c worker_hol.c worker_device.c worker_fixture.c)
target_link_libraries(check_worker PRIVATE chipd_worker)
