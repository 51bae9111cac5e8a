/* sup_notify.c - sd_notify and s6 readiness, spoken directly. See sup_notify.h. */
#include "sup_notify.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Fills @sa from @path; returns the address length to pass to sendto, or -errno. */
static int notify_addr(const char *path, struct sockaddr_un *sa)
{
	size_t len = strlen(path);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (path[0] == '@') {
		/* abstract: sun_path[0] is NUL and the length counts exactly the name's bytes
		 * (a trailing NUL would be part of the name, another socket) */
		if (len > sizeof(sa->sun_path))
			return -ENAMETOOLONG;
		memcpy(sa->sun_path + 1, path + 1, len - 1);
		return (int)(offsetof(struct sockaddr_un, sun_path) + len);
	}
	if (path[0] != '/')
		return -EAFNOSUPPORT;
	if (len >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, path, len);
	return (int)(offsetof(struct sockaddr_un, sun_path) + len + 1);
}

int sup_notify(const char *socket_path, const char *msg)
{
	struct sockaddr_un sa;
	int alen, fd, rc = 0;

	if (!socket_path || !*socket_path)
		return 0;
	if (!msg)
		return -EINVAL;
	alen = notify_addr(socket_path, &sa);
	if (alen < 0)
		return alen;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* MSG_NOSIGNAL: a vanished listener is an error code, never a SIGPIPE */
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&sa,
		   (socklen_t)alen) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int sup_notify_fd(int fd)
{
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return 0;
	do
		n = write(fd, "\n", 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		rc = -errno;
	close(fd);
	return rc;
}
