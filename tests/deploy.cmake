# The deploy files against the built chipd and chipctl (tests/deploy/*.sh): the Slurm
# job scripts on a private single-node Slurm cluster and on a two-node one made of
# network namespaces (root; installs Debian's Slurm and munge when missing; about 20 s
# each), chipd under systemd's notify protocol and the
# unit files, and the Prometheus alert rules through promtool. 77 = skipped.
# The Slurm job runs in the plain build only: it tests the scripts and the scheduler
# path, and chipd under the sanitizers is covered by the process-level suites.
set(chipd_deploy_tests systemd_notify prom_rules)
if(NOT CHIPD_SANITIZE)
  list(APPEND chipd_deploy_tests slurm slurm_multinode)
endif()
foreach(t ${chipd_deploy_tests})
  add_test(NAME deploy_${t}
           COMMAND ${CHIPD_SKIP_CHECK} bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/${t}.sh
                   $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl>)
  set_tests_properties(deploy_${t} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
# The Debian packages (tests/deploy/packages.sh, root): built from a Release tree of
# their own (deploy-packages/ here), installed with dpkg, used, removed and purged.
# The lock keeps it away from the other tests of the machine's chipd, units and dpkg.
if(NOT CHIPD_SANITIZE)
  add_test(NAME deploy_packages
           COMMAND ${CHIPD_SKIP_CHECK} bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/packages.sh
                   ${CMAKE_BINARY_DIR}/deploy-packages)
  set_tests_properties(deploy_packages PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK chipd_system)
  set_tests_properties(deploy_systemd_notify PROPERTIES RESOURCE_LOCK chipd_system)
endif()
# chipd --allow-group with real uids (tests/deploy/allow_group.sh, root): it makes a
# group and three accounts (chipdt-PID-*) and removes them; the lock keeps it off the
# other tests that change the machine's accounts.
# The plain build also runs the Python client as a member (an ASan/TSan libchipd.so
# cannot be loaded into a plain python3).
if(CHIPD_SANITIZE)
  set(chipd_allow_group_py "")
else()
  set(chipd_allow_group_py $<TARGET_FILE:libchipd> ${PROJECT_SOURCE_DIR}/proto/python)
endif()
add_test(NAME deploy_allow_group
         COMMAND ${CHIPD_SKIP_CHECK} bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/allow_group.sh
                 $<TARGET_FILE:chipd> $<TARGET_FILE:chipctl> ${chipd_allow_group_py})
set_tests_properties(deploy_allow_group PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     RESOURCE_LOCK chipd_system)
# Fixed ports, daemons and a cluster-wide lock (/tmp/chipd-slurm-test.lock): the two
# Slurm tests never run at once. The single-node one runs alone (its node is this
# machine); the two-node one has its own namespaces and ports and may run beside
# other tests.
if(TEST deploy_slurm)
  set_tests_properties(deploy_slurm PROPERTIES RUN_SERIAL TRUE RESOURCE_LOCK chipd_slurm)
  set_tests_properties(deploy_slurm_multinode PROPERTIES RESOURCE_LOCK chipd_slurm)
endif()
# The out-of-tree callable example (docs/examples/markov): the build installed under a
# scratch prefix, the example built against it with pkg-config alone, run by the
# installed chipd, tokens checked against the CPU walk. The plain build only: the
# sanitizers' chipd is covered by the other suites.
if(NOT CHIPD_SANITIZE)
  add_test(NAME deploy_callable_example
           COMMAND ${CHIPD_SKIP_CHECK} bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/callable_example.sh
                   ${CMAKE_BINARY_DIR})
  set_tests_properties(deploy_callable_example PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
  # the same against the build tree itself, not installed (chipd-callable-uninstalled.pc)
  add_test(NAME deploy_callable_example_build_tree
           COMMAND ${CHIPD_SKIP_CHECK} bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/callable_example.sh
                   ${CMAKE_BINARY_DIR} --build-tree)
  set_tests_properties(deploy_callable_example_build_tree PROPERTIES TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()
