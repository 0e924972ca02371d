/* SPDX-License-Identifier: Apache-2.0 */
/* Loopback in a fresh network namespace. */
#include "net.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int wr_net_loopback_up(void)
{
    struct ifreq ifr;
    int fd, ret = 0;

    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        ret = -errno;
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
            ret = -errno;
    }
    close(fd);
    return ret;
}
