/* fdpass.h - one datagram with at most one file descriptor attached (SCM_RIGHTS), over
 * a unix socket (SOCK_SEQPACKET or SOCK_DGRAM): the worker spawner's reply with the
 * worker's pidfd, the supervisor's hello answer with the exchange region's memfd. */
#ifndef CHIPD_SHM_FDPASS_H
#define CHIPD_SHM_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* Sends @len bytes of @buf on @sock in one sendmsg, with @fd attached when it is >= 0.
 * @flags are sendmsg's (MSG_NOSIGNAL is always added). Returns the bytes sent, or
 * -errno (-EPIPE for a short send). */
ssize_t fdpass_send(int sock, const void *buf, size_t len, int fd, int flags);

/* Receives one datagram of at most @cap bytes from @sock (recvmsg with @flags and
 * MSG_CMSG_CLOEXEC). *@fd is the descriptor that came with it (close-on-exec), or -1
 * when none did. A datagram with anything but exactly one descriptor, or truncated
 * control data, closes whatever came and answers -EBADMSG; one whose descriptors this
 * process had no room for (none installed: out of descriptors) answers -EMFILE, its
 * bytes read. Returns the bytes received (0: the peer closed) or -errno. */
ssize_t fdpass_recv(int sock, void *buf, size_t cap, int *fd, int flags);

#endif
