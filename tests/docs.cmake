# The docs checked against the code, each by a program in tests/docs/.

# docs/architecture.md's module edge list against the sources' #include graph and the
# build's declared links (include_graph.py). Skipped (77) without python3.
find_program(CHIPD_DOCS_PYTHON3 NAMES python3)
if(CHIPD_DOCS_PYTHON3)
  add_test(NAME docs_include_graph
           COMMAND ${CHIPD_DOCS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/docs/include_graph.py
                   ${PROJECT_SOURCE_DIR})
else()
  add_test(NAME docs_include_graph
           COMMAND sh -c "echo 'docs_include_graph: skipped: no python3'; exit 77")
endif()
set_tests_properties(docs_include_graph PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)

# docs/protocol.md §8.1's counter tables against proto/node.h: every counter of each
# block a row of its block's table, with its kind (counters.py). Skipped (77) without
# python3.
if(CHIPD_DOCS_PYTHON3)
  add_test(NAME docs_counters
           COMMAND ${CHIPD_DOCS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/docs/counters.py
                   ${PROJECT_SOURCE_DIR})
else()
  add_test(NAME docs_counters COMMAND sh -c "echo 'docs_counters: skipped: no python3'; exit 77")
endif()
set_tests_properties(docs_counters PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)

# docs/protocol.md §8.6 against the validator's workload tables (wl_table prints them
# as the document's Markdown), and no copy of them in docs/architecture.md.
add_executable(wl_table docs/wl_table.c)
target_link_libraries(wl_table PRIVATE chipd_kernels)
add_test(NAME docs_workloads COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/docs/workloads.sh
                                     $<TARGET_FILE:wl_table> ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_workloads PROPERTIES TIMEOUT 60)

# docs/protocol.md §8.1's default shape (sizes, offsets, totals) against the layout the
# code computes (node_shape prints it as the document's phrases).
add_executable(node_shape docs/node_shape.c)
target_link_libraries(node_shape PRIVATE chipd_proto)
add_test(NAME docs_node_shape COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/docs/node_shape.sh
                                      $<TARGET_FILE:node_shape> ${PROJECT_SOURCE_DIR}/docs/protocol.md)
set_tests_properties(docs_node_shape PROPERTIES TIMEOUT 60)

# docs/chipd.8 against chipd itself: every option it lists exists, every flag and every
# --print-config key is in it, each flag's CHIPD_* variable is named with the flag.
add_test(NAME docs_chipd_options COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/docs/chipd_options.sh
                                         $<TARGET_FILE:chipd> ${PROJECT_SOURCE_DIR}/docs/chipd.8)
set_tests_properties(docs_chipd_options PROPERTIES TIMEOUT 60)

# Every example of the tree's Markdown files (all *.md, found at test time) and the man
# pages, read from the documents at test time and run against a real chipd with sim
# chips (examples.py: the rule for what is an example; examples_rules.py: the table of
# what runs substituted or elsewhere, with reasons); protocol requests go through a raw
# mailbox call (docs_raw_call). Plain
# build only, like python.cmake: the README's Python example loads libchipd.so into a
# plain python3. Skipped (77) without python3.
if(CHIPD_SANITIZE STREQUAL "")
  add_executable(docs_raw_call docs/raw_call.c)
  target_link_libraries(docs_raw_call PRIVATE chipd_proto chipd_shm)
  if(CHIPD_DOCS_PYTHON3)
    add_test(NAME docs_examples
             COMMAND ${CHIPD_DOCS_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/docs/examples.py
                     --root ${PROJECT_SOURCE_DIR} --build ${CMAKE_BINARY_DIR}
                     --chipd $<TARGET_FILE:chipd> --chipctl $<TARGET_FILE:chipctl>
                     --lib $<TARGET_FILE:libchipd> --raw-call $<TARGET_FILE:docs_raw_call>)
  else()
    add_test(NAME docs_examples
             COMMAND sh -c "echo 'docs_examples: skipped: no python3'; exit 77")
  endif()
  set_tests_properties(docs_examples PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77)
endif()
