# supervisor/ suites of chipd's self-contained parts (chipd_sup_base): the
# configuration's sources and checks (check_sup_config), its environment: Slurm,
# GPU masks, systemd (check_sup_config_env); readiness to systemd
# and s6, and the log line (check_sup_notify). Included from tests/CMakeLists.txt.
chipd_check(check_sup_config sup_config_fixture.c)
target_link_libraries(check_sup_config PRIVATE chipd_sup_base)
chipd_check(check_sup_config_env sup_config_fixture.c)
target_link_libraries(check_sup_config_env PRIVATE chipd_sup_base)
chipd_check(check_sup_notify)
target_link_libraries(check_sup_notify PRIVATE chipd_sup_base)
# The private runtime directory, files created O_EXCL 0600, signals through pidfds
# (check_sup_files).
chipd_check(check_sup_files)
target_link_libraries(check_sup_files PRIVATE chipd_sup_base)
