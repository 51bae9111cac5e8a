# The fault matrix and the load test: a real chipd (sim chips) hit by one
# fault per tcase, and many clients with exact accounting. Same shape as chipd_check
# (tests/CMakeLists.txt), with the sources in tests/fault/.
function(chipd_fault_check name timeout) # extra sources in ARGN
  list(TRANSFORM ARGN PREPEND fault/)
  add_executable(${name} fault/${name}.c fault/fault_util.c unit/testutil.c
                 unit/chipd_fixture.c ${ARGN})
  target_include_directories(${name} PRIVATE unit fault)
  target_link_libraries(${name} PRIVATE chipd_proto chipd_shm PkgConfig::CHECK Threads::Threads)
  target_compile_definitions(${name} PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>")
  add_dependencies(${name} chipd)
  add_test(NAME ${name} COMMAND ${name})
  # CK_DEFAULT_TIMEOUT bounds each tcase (a row that hangs fails, it never stalls
  # the run); sanitizer builds are several times slower, hence the margin.
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77
                       LABELS fault ENVIRONMENT "CK_DEFAULT_TIMEOUT=60")
endfunction()

chipd_fault_check(check_fault 600 fault_worker.c fault_client.c fault_msgs.c)
# Abandoned work (dead or impatient clients, broken rings) and an event loop that
# waits for no worker; each tcase sets its own timeout.
chipd_fault_check(check_abandon 600)
# Submits in flight at the router: many assigns posted to a stopped worker, and that
# worker killed with them in flight.
chipd_fault_check(check_inflight 300)
# Identity from the handshake socket (forged, unconnected, killed clients, impostors,
# the old layout) and the per-client bounds; each tcase sets its own timeout.
chipd_fault_check(check_identity 300)
target_sources(check_identity PRIVATE unit/hello_fixture.c fault/identity_fds.c)
# What a client may write, enforced by the kernel (node layout 3): the node region
# read-only (its client part runs as nobody), the exchange memfd sealed, old layouts
# refused. Root only (77 otherwise).
chipd_fault_check(check_readonly 300)
target_sources(check_readonly PRIVATE unit/hello_fixture.c)
# One client cannot take the client mailbox (--max-client-slots): a hog claiming every
# slot, one posting past its bound, threads of one process past it.
chipd_fault_check(check_slots 300)
# 64 clients x 50 requests in CI; FT_LOAD_REQUESTS=1000 for the full run.
chipd_fault_check(check_load 300)

# 60 seconds of libFuzzer on node-region attach, beside the decoder's (proto.cmake);
# its build carries its own ASan+UBSan, so it runs from the plain build only.
if(CHIPD_SANITIZE STREQUAL "")
  add_test(NAME fuzz_region
           COMMAND ${CHIPD_SKIP_CHECK} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh 60
                   ${CMAKE_BINARY_DIR}/fuzz-region region)
  set_tests_properties(fuzz_region PROPERTIES LABELS fuzz TIMEOUT 400 SKIP_RETURN_CODE 77)
endif()

# valgrind memcheck over a short integration run (chipctl and a small load run
# against a native chipd: valgrind 3.19 lacks pidfd_open, which chipd needs); ~15 s.
# Plain build only (valgrind does not run sanitizer builds); skipped (77) without
# valgrind.
if(CHIPD_SANITIZE STREQUAL "")
  add_test(NAME memcheck_clients COMMAND ${CHIPD_SKIP_CHECK}
           ${CMAKE_CURRENT_SOURCE_DIR}/fault/memcheck.sh
           $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl> $<TARGET_FILE:check_load>)
  set_tests_properties(memcheck_clients PROPERTIES LABELS "memcheck;fault" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()

# Hostile clients: one stray write into the node region per tcase (check_hostile), and
# a corruption fuzzer, one tcase per part of the region (check_hostile_fuzz: 1.5 s of
# writes per part here; --seconds S for a long run). Their good clients check every
# token against the workloads' reference (chipd_kernels).
chipd_fault_check(check_hostile 300 hostile_util.c)
target_link_libraries(check_hostile PRIVATE chipd_kernels)
chipd_fault_check(check_hostile_fuzz 600 hostile_util.c)
target_link_libraries(check_hostile_fuzz PRIVATE chipd_kernels)
