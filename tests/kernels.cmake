# Suites of kernels/: the device layer, the kernels against their CPU references, the
# workloads. Included from tests/CMakeLists.txt.
chipd_check(check_device device_model.c device_cases.c)
chipd_check(check_kernels kernel_cases.c)
chipd_check(check_workloads kernel_cases.c)
foreach(suite check_device check_kernels check_workloads)
  target_link_libraries(${suite} PRIVATE chipd_kernels)
endforeach()

# With a GPU variant built, the GPU check runs in CTest too: it exits 77 (skipped)
# where the runtime finds no device, as on a build machine.
if(CHIPD_HIP OR CHIPD_CUDA)
  add_executable(gpu_check gpu/gpu_check.c unit/kernel_cases.c unit/device_cases.c)
  target_include_directories(gpu_check PRIVATE unit)
  target_link_libraries(gpu_check PRIVATE chipd_kernels)
  add_test(NAME gpu_check COMMAND gpu_check)
  set_tests_properties(gpu_check PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  add_executable(gpu_bench gpu/gpu_bench.c)
  target_link_libraries(gpu_bench PRIVATE chipd_kernels)
endif()

# tests/gpu/run.sh builds gpu_check and gpu_bench without CMake where a GPU machine
# lacks the other build dependencies, from the sources it reads in the CMake files
# (run.sh --sources). gpu_run_sources compares that reading with the targets made here
# (gpu_run_sources.txt, written now): a source renamed, added or moved so that run.sh
# reads it wrong fails here, not on the GPU machine. Without a GPU variant, what only
# the GPU variants build (dev_hip.c, the two programs) is left out of the comparison.
set(chipd_run_targets chipd_shm chipd_cl_support ${CHIPD_BUILTIN_CALLABLE_TARGETS} chipd_kernels)
set(chipd_run_variant sim)
if(TARGET gpu_check)
  list(APPEND chipd_run_targets gpu_check gpu_bench)
  set(chipd_run_variant gpu)
endif()
set(chipd_run_sources "")
foreach(target ${chipd_run_targets})
  get_target_property(srcs ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  foreach(src ${srcs})
    cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY ${dir} NORMALIZE)
    get_source_file_property(generated ${src} DIRECTORY ${dir} GENERATED) # kernels_hip.o
    if(NOT generated)
      cmake_path(RELATIVE_PATH src BASE_DIRECTORY ${PROJECT_SOURCE_DIR})
      string(APPEND chipd_run_sources "${target} ${src}\n")
    endif()
  endforeach()
endforeach()
get_directory_property(src DIRECTORY ${PROJECT_SOURCE_DIR}/kernels DEFINITION CHIPD_HIP_SRC)
cmake_path(RELATIVE_PATH src BASE_DIRECTORY ${PROJECT_SOURCE_DIR})
string(APPEND chipd_run_sources "nvcc ${src}\n")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/gpu_run_sources.txt "${chipd_run_sources}")
add_test(NAME gpu_run_sources
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/sources.sh
                 ${CMAKE_CURRENT_BINARY_DIR}/gpu_run_sources.txt ${chipd_run_variant})
set_tests_properties(gpu_run_sources PROPERTIES TIMEOUT 60)

# Loading callables: the built-ins, a callable of the tests' own and broken ones, each
# built from tests/callables/test_callable.c as a variant (TEST_CALLABLE) against the
# ABI alone, and chipd refusing to start on them.
set(CHIPD_TEST_CALLABLES_DIR ${CMAKE_CURRENT_BINARY_DIR}/test_callables)
set(variant 0)
foreach(name tc_good tc_abi tc_no_entry tc_init tc_table tc_dup tc_refuse tc_kill)
  add_library(${name} MODULE callables/test_callable.c)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/kernels/include)
  target_compile_definitions(${name} PRIVATE TEST_CALLABLE=${variant})
  set_target_properties(${name} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY
                        ${CHIPD_TEST_CALLABLES_DIR} C_VISIBILITY_PRESET hidden)
  list(APPEND CHIPD_TEST_CALLABLES ${name})
  math(EXPR variant "${variant} + 1")
endforeach()
chipd_check(check_callables)
target_link_libraries(check_callables PRIVATE chipd_kernels)
add_dependencies(check_callables ${CHIPD_TEST_CALLABLES} chipd)
target_compile_definitions(check_callables PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>"
                           CL_BUILTIN_DIR="${CMAKE_BINARY_DIR}/callables"
                           CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}")

# Data in and out of callables: the tests' "echo" callable (tests/callables/
# data_callable.c) on a real chipd, one that takes 16 input bytes at most, and one
# that declares too many payload bytes.
foreach(name dc_echo dc_small dc_big_payload)
  add_library(${name} MODULE callables/data_callable.c)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/kernels/include)
  set_target_properties(${name} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY
                        ${CHIPD_TEST_CALLABLES_DIR} C_VISIBILITY_PRESET hidden)
endforeach()
target_compile_definitions(dc_big_payload PRIVATE DC_PAYLOAD_BYTES=25)
target_compile_definitions(dc_small PRIVATE DC_INPUT_MAX=16)
chipd_check(check_data chipd_fixture.c)
target_link_libraries(check_data PRIVATE chipd_proto)
add_dependencies(check_data dc_echo dc_small dc_big_payload chipd)
target_compile_definitions(check_data PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>"
                           CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}")

# Registering callables while the node runs: a real chipd, the tests' callables
# registered, refused by one chip, killing a worker mid-registration, replayed to a
# restarted worker, drained, cancelled, limited and quarantined.
chipd_check(check_register chipd_fixture.c)
target_link_libraries(check_register PRIVATE chipd_proto)
add_dependencies(check_register ${CHIPD_TEST_CALLABLES} chipd)
target_compile_definitions(check_register PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>"
                           CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}")
