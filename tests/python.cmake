# The Python client (proto/python, ctypes over libchipd) against a real chipd with sim
# chips: pytest from Debian's python3-pytest, skipped (77) without it. Not in the
# sanitizer builds: an ASan/TSan libchipd.so cannot be loaded into a plain python3.
if(NOT CHIPD_SANITIZE STREQUAL "")
  return()
endif()

# Debian's interpreter first (pytest comes from python3-pytest), else any python3.
find_program(CHIPD_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(CHIPD_PYTHON3 NAMES python3)

# Prints chipd.h's struct layouts; test_layout.py compares them with ctypes'.
add_executable(chipd_py_layout python/layout.c)
target_include_directories(chipd_py_layout PRIVATE ${PROJECT_SOURCE_DIR}/proto/include)

add_test(NAME python_client
         COMMAND ${CHIPD_SKIP_CHECK} sh ${CMAKE_CURRENT_SOURCE_DIR}/python/run.sh "${CHIPD_PYTHON3}"
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set(chipd_py_env
    "CHIPD_LIB=$<TARGET_FILE:libchipd>" "CHIPD_BIN=$<TARGET_FILE:chipd>"
    "CHIPD_LAYOUT_BIN=$<TARGET_FILE:chipd_py_layout>"
    "CHIPD_TEST_CALLABLES_DIR=${CHIPD_TEST_CALLABLES_DIR}"
    "PYTHONPATH=${PROJECT_SOURCE_DIR}/proto/python")
set_tests_properties(python_client PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "${chipd_py_env}")
