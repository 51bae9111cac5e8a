# Suites of kernels/: the device layer, the kernels against their CPU references, the
# workloads. Included from tests/CMakeLists.txt.
chipd_check(check_device device_model.c device_cases.c device_module.c)
chipd_check(check_kernels kernel_cases.c)
chipd_check(check_workloads kernel_cases.c)
foreach(suite check_device check_kernels check_workloads)
  target_link_libraries(${suite} PRIVATE chipd_kernels)
endforeach()

# With a GPU variant built, the GPU check runs in CTest too: it exits 77 (skipped)
# where the runtime finds no device, as on a build machine.
# Its module case loads the tests' own kernel, tc_fill, as a code object of this GPU
# build, compiled from gpu/tc_kernels.hip (tests/gpu/run.sh reads the source's name
# here).
set(CHIPD_TC_HIP_SRC ${CMAKE_CURRENT_SOURCE_DIR}/gpu/tc_kernels.hip)
if(CHIPD_HIP OR CHIPD_CUDA)
  if(CHIPD_HIP)
    set(tc_obj ${CMAKE_CURRENT_BINARY_DIR}/tc_kernels.hsaco)
    set(tc_arch "")
    foreach(arch ${CHIPD_HIP_ARCHS})
      list(APPEND tc_arch --offload-arch=${arch})
    endforeach()
    set(tc_cmd ${CHIPD_HIPCC} --genco ${tc_arch} -O3 -Wall)
  else()
    set(tc_obj ${CMAKE_CURRENT_BINARY_DIR}/tc_kernels.cubin)
    set(tc_cmd ${CHIPD_NVCC} -x cu -cubin -arch=${CHIPD_CUDA_ARCH} -O3 -DCHIPD_HIP_CUDA)
  endif()
  add_custom_command(
    OUTPUT ${tc_obj}
    COMMAND ${tc_cmd} -I${PROJECT_SOURCE_DIR}/kernels -I${CMAKE_CURRENT_SOURCE_DIR}/callables
            -o ${tc_obj} ${CHIPD_TC_HIP_SRC}
    DEPENDS ${CHIPD_TC_HIP_SRC} ${CMAKE_CURRENT_SOURCE_DIR}/callables/tc_kernels.h
    COMMENT "the tests' code object: tc_kernels.hip")
  add_custom_target(tc_kernels_gpu DEPENDS ${tc_obj})
  add_executable(gpu_check gpu/gpu_check.c unit/kernel_cases.c unit/device_cases.c)
  target_include_directories(gpu_check PRIVATE unit callables)
  target_link_libraries(gpu_check PRIVATE chipd_kernels)
  add_dependencies(gpu_check tc_kernels_gpu)
  target_compile_definitions(gpu_check PRIVATE TC_KERNELS_GPU="${tc_obj}")
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
cmake_path(RELATIVE_PATH CHIPD_TC_HIP_SRC BASE_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE src)
string(APPEND chipd_run_sources "nvcc_module ${src}\n")
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
foreach(name tc_good tc_abi tc_no_entry tc_init tc_table tc_dup tc_refuse tc_kill tc_own tc_v1
             tc_data tc_exit tc_segv tc_hang)
  add_library(${name} MODULE callables/test_callable.c)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/kernels/include)
  target_compile_definitions(${name} PRIVATE TEST_CALLABLE=${variant})
  set_target_properties(${name} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY
                        ${CHIPD_TEST_CALLABLES_DIR} C_VISIBILITY_PRESET hidden)
  list(APPEND CHIPD_TEST_CALLABLES ${name})
  math(EXPR variant "${variant} + 1")
endforeach()
# tc_own's kernels, the sim form: a shared object beside it
add_library(tc_kernels_sim MODULE callables/tc_kernels_sim.c)
target_include_directories(tc_kernels_sim PRIVATE ${PROJECT_SOURCE_DIR}/kernels/include)
set_target_properties(tc_kernels_sim PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY
                      ${CHIPD_TEST_CALLABLES_DIR} C_VISIBILITY_PRESET hidden)
list(APPEND CHIPD_TEST_CALLABLES tc_kernels_sim)
# the device layer's module tests load it too
target_include_directories(check_device PRIVATE callables)
add_dependencies(check_device tc_kernels_sim)
target_compile_definitions(check_device PRIVATE
                           TC_KERNELS_SIM="${CHIPD_TEST_CALLABLES_DIR}/tc_kernels_sim.so")
chipd_check(check_callables)
target_link_libraries(check_callables PRIVATE chipd_kernels)
add_dependencies(check_callables ${CHIPD_TEST_CALLABLES} chipd)
target_compile_definitions(check_callables PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>"
                           CL_BUILTIN_DIR="${CMAKE_BINARY_DIR}/callables"
                           CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}")

# A callable's own kernels: tc_own and its sim kernel file, each refusal.
chipd_check(check_own_kernels)
target_link_libraries(check_own_kernels PRIVATE chipd_kernels)
add_dependencies(check_own_kernels ${CHIPD_TEST_CALLABLES} chipd)
target_compile_definitions(check_own_kernels PRIVATE CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}"
                           CHIPD_BIN="$<TARGET_FILE:chipd>")

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
# restarted worker, drained, cancelled, limited and quarantined; unregistered past a
# chip whose live worker does not answer (check_unregister); a library that exits,
# crashes or hangs in its load refused by the registration's probe, chipd serving on
# (check_register_probe).
foreach(t check_register check_unregister check_register_probe)
  chipd_check(${t} chipd_fixture.c register_fixture.c)
  target_link_libraries(${t} PRIVATE chipd_proto)
  add_dependencies(${t} ${CHIPD_TEST_CALLABLES} chipd)
  target_compile_definitions(${t} PRIVATE CHIPD_BIN="$<TARGET_FILE:chipd>"
                             CL_TEST_DIR="${CHIPD_TEST_CALLABLES_DIR}")
endforeach()
