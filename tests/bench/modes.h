/* modes.h - chipbench modes; each parses its own options and returns an exit code
 * (0 ok, 1 a measurement of chipd failed, 64 usage). */
#ifndef CHIPD_BENCH_MODES_H
#define CHIPD_BENCH_MODES_H

int mode_mailbox(int argc, char **argv);
int mode_overlap(int argc, char **argv);
int mode_dispatch(int argc, char **argv);
int mode_e2e(int argc, char **argv);
int mode_startup(int argc, char **argv);
int mode_idle(int argc, char **argv);
int mode_hol(int argc, char **argv);

#endif
