# Suites of worker/: the O and S threads, admission, cancel, faults, shutdown, trace.
# Included from tests/CMakeLists.txt.
chipd_check(check_worker check_worker_faults.c check_worker_trace.c worker_fixture.c)
target_link_libraries(check_worker PRIVATE chipd_worker)
