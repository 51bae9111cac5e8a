# Suites of kernels/: the device layer, the kernels against their CPU references, the
# workloads. Included from tests/CMakeLists.txt.
chipd_check(check_device)
chipd_check(check_kernels kernel_cases.c)
chipd_check(check_workloads kernel_cases.c)
foreach(suite check_device check_kernels check_workloads)
  target_link_libraries(${suite} PRIVATE chipd_kernels)
endforeach()

# With a GPU variant built, the GPU check runs in CTest too: it exits 77 (skipped)
# where the runtime finds no device, as on a build machine.
if(CHIPD_HIP OR CHIPD_CUDA)
  add_executable(gpu_check gpu/gpu_check.c unit/kernel_cases.c)
  target_include_directories(gpu_check PRIVATE unit)
  target_link_libraries(gpu_check PRIVATE chipd_kernels)
  add_test(NAME gpu_check COMMAND gpu_check)
  set_tests_properties(gpu_check PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_executable(gpu_bench gpu/gpu_bench.c)
  target_link_libraries(gpu_bench PRIVATE chipd_kernels)
endif()
