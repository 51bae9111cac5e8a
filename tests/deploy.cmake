# The deploy files against the built chipd and chipctl (tests/deploy/*.sh): the Slurm
# job scripts on a private single-node Slurm cluster (root; installs Debian's Slurm
# and munge when missing; about 20 s), chipd under systemd's notify protocol and the
# unit files, and the Prometheus alert rules through promtool. 77 = skipped.
if(NOT TARGET chipctl)
  return()
endif()
foreach(t slurm systemd_notify prom_rules)
  add_test(NAME deploy_${t}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/deploy/${t}.sh
                   $<TARGET_FILE:chipd_sup> $<TARGET_FILE:chipctl>)
  set_tests_properties(deploy_${t} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
# Fixed ports, daemons and a cluster-wide lock: never beside another test.
set_tests_properties(deploy_slurm PROPERTIES RUN_SERIAL TRUE)
