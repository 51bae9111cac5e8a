# proto/ suites: the codec and the handler table (check_proto), libchipd against an
# in-process server on a real node region (check_client), and the decoder's fuzz run.
chipd_check(check_proto proto_malformed.c proto_fixture.c proto_dispatch_cases.c)
target_link_libraries(check_proto PRIVATE chipd_proto)
chipd_check(check_client client_fixture.c client_errors.c hello_fixture.c)
target_link_libraries(check_client PRIVATE chipd_proto)

# 60 seconds of libFuzzer on the decoder; skipped (77) without clang's fuzzer runtime.
# The fuzz build carries its own ASan+UBSan, so it runs once, from the plain build.
if(CHIPD_SANITIZE STREQUAL "")
  add_test(NAME fuzz_decode
           COMMAND ${CHIPD_SKIP_CHECK} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.sh 60
                   ${CMAKE_BINARY_DIR}/fuzz)
  set_tests_properties(fuzz_decode PROPERTIES LABELS fuzz TIMEOUT 400 SKIP_RETURN_CODE 77)
  # run.sh turns a fuzz target's crash into exit 1, never 77 (ctest's "skipped")
  add_test(NAME fuzz_run_reports_findings COMMAND ${CHIPD_SKIP_CHECK}
           ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_check.sh
           ${CMAKE_BINARY_DIR}/fuzz-selftest)
  set_tests_properties(fuzz_run_reports_findings PROPERTIES LABELS fuzz TIMEOUT 120
                       SKIP_RETURN_CODE 77)
endif()
