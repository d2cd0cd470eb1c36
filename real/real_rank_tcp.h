/* real_rank_tcp: TCP plumbing of the multi-process real runtime (real_rank.h), and the cpu
 * per-process communication backend built on it.
 *
 * Star: rank 0 listens on (addr, port); every other rank connects (retrying until the
 * deadline) and says its rank and the world size it was started with; rank 0 checks them (a
 * world-size mismatch between processes is an HS_EINVAL naming both sizes). Afterwards rank 0
 * holds one socket per other rank and every other rank one socket to rank 0.
 *
 * hs_real_comm_tcp_rank: the cpu backend of a multi-process run, this process's rank only
 * (like hs_real_comm_nccl_rank, real_nccl.h). Host buffers. It opens its own star on
 * MASTER_PORT (mpirun: 127.0.0.1:29500 unless MASTER_ADDR/MASTER_PORT are set). All-reduce is
 * a reduction at rank 0: the other participants send their buffers, rank 0 adds them with
 * their weights in rank order and sends the sum back, so rank 0 must take part (HS_EUNSUPPORTED
 * otherwise: the multi-process runtime only issues all-reduces over every worker). send/recv
 * work between rank 0 and another rank, in order (a tag that is not the next one is an
 * error). Every wait is bounded by cfg.timeout_s; a peer whose socket closes is HS_ERUNTIME
 * naming its rank ("its process died?"); abort wakes every wait with HS_EINTR, and cfg.cancel
 * ends open's wait for the other ranks with HS_EINTR.
 *
 * Threading: calls on one comm come from one thread at a time (the rank's executor); abort
 * may come from any thread. Units: seconds, floats. */
#ifndef HS_REAL_RANK_TCP_H
#define HS_REAL_RANK_TCP_H

#include <stddef.h>
#include <sys/socket.h>

#include "core/core_error.h"
#include "real/real_comm.h"

#define HS_RANK_MAX_WORLD 256

/* Opens the star. fds has HS_RANK_MAX_WORLD slots, all set: rank 0 gets fds[r] for r >= 1,
 * the others fds[0]; unused slots are -1. `what` names the channel in messages. A nonzero
 * *cancel (NULL: none; read atomically, looked at every 0.1 s) ends the wait for the other ranks
 * with HS_EINTR. */
int hs_rank_star_open(const char *what, const char *addr, int port, int rank, int world, double timeout_s,
                      const int *cancel, int *fds, hs_diag *d);
void hs_rank_star_close(int *fds, int world);

/* Writes or reads exactly n bytes before the absolute deadline (hs_real_mono, real_comm.h), giving up early when
 * abort_fd (-1 = none) becomes readable. 0; -1 the peer closed or the socket failed; -2 the
 * deadline passed; -3 aborted. */
int hs_rank_write(int fd, const void *p, size_t n, double deadline, int abort_fd);
int hs_rank_read(int fd, void *p, size_t n, double deadline, int abort_fd);

/* Whether *cancel (NULL: none) says to give up, read atomically. */
int hs_rank_cancelled(const int *cancel);
/* Waits until fd is ready for ev (POLLIN, POLLOUT; a closed or failed socket counts as ready)
 * before the absolute deadline (hs_real_mono), looking at *cancel (NULL: none) every 0.1 s:
 * 0 ready, -2 the deadline passed, -4 cancelled, -1 poll failed. */
int hs_rank_wait(int fd, short ev, double deadline, const int *cancel);

/* connect() by the absolute deadline (hs_real_mono): non-blocking, then polled, since a
 * blocking connect to an address that drops SYNs waits out the kernel's retries (about two
 * minutes) whatever the timeout. 0 connected (the socket blocking again, as its users expect),
 * -1 refused or failed, -2 the deadline passed. */
int hs_rank_connect(int fd, const struct sockaddr *addr, socklen_t len, double deadline);

extern const hs_real_comm_ops hs_real_comm_tcp_rank;

#endif
