/* sup_notify.h - telling the service manager how chipd is doing (docs/operations.md).
 *
 * systemd (Type=notify): datagrams of "KEY=VALUE" lines to $NOTIFY_SOCKET, the
 * sd_notify protocol spoken directly, without libsystemd. chipd sends
 * "READY=1\nSTATUS=...", "STOPPING=1" and "WATCHDOG=1" (every half of WATCHDOG_USEC).
 * s6 (and runit with s6-style notification): one newline on a descriptor that the
 * supervisor handed over (--notify-fd N), then the descriptor is closed.
 */
#ifndef CHIPD_SUP_NOTIFY_H
#define CHIPD_SUP_NOTIFY_H

/* Sends @msg as one datagram on an AF_UNIX SOCK_DGRAM socket to @socket_path: a
 * filesystem path ("/run/systemd/notify") or, with a leading '@', a name in the
 * abstract namespace. Does nothing and returns 0 when @socket_path is NULL or empty
 * (not run by systemd). Returns 0, -EAFNOSUPPORT for another kind of address (systemd's
 * "vsock:" ones), -ENAMETOOLONG when it does not fit sun_path, -EINVAL for a NULL
 * @msg, or the -errno of socket/sendto (-ECONNREFUSED, -ENOENT: nobody listens). */
int sup_notify(const char *socket_path, const char *msg);

/* Writes "\n" to the s6-style notification descriptor @fd and closes it, whatever the
 * write did (readiness is said once). Does nothing and returns 0 when @fd < 0. Returns
 * 0 or the -errno of the write (-EPIPE: the reader is gone). */
int sup_notify_fd(int fd);

#endif
