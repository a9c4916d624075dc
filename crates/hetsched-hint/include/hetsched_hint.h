/* hetsched hint client: tell the hetsched daemon which data fragment the calling thread works on
 * (Pinter & Zalmanovici, data-sharing-conscious scheduling, section 4.1). Build with
 * `cc app.c $(pkg-config --cflags --libs hetsched_hint)` (docs/live.md, Hints). The daemon's socket
 * is $HETSCHED_HINT_SOCKET, read at the first call, else /run/hetsched/hint.sock.
 *
 * Hints are advice: no call ever waits for the daemon or stops the program. The enter and leave
 * functions return
 *   0             the hint was sent;
 *   -EAGAIN       the daemon's queue is full: the hint was dropped (hetsched_hint_dropped counts
 *                 them);
 *   -ENOTCONN, -ECONNREFUSED, -ENOENT
 *                 no daemon listens at the socket now: nothing was sent. The library tries
 *                 again at a later call (at most once a second), so a daemon that starts or
 *                 restarts later gets the hints from then on;
 *   -EINVAL       hetsched_df_leave of a fragment the calling thread is not in;
 *   another negative errno: the socket's send failed so (nothing was sent). */
#ifndef HETSCHED_HINT_H
#define HETSCHED_HINT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The calling thread starts working on data fragment df, leaving its current one if any. */
int32_t hetsched_df_enter(uint64_t df);

/* The calling thread stops working on data fragment df. */
int32_t hetsched_df_leave(uint64_t df);

/* The hint wire-format version this library speaks (1). */
uint32_t hetsched_hint_version(void);

/* Hints dropped so far because the daemon's queue was full. */
uint64_t hetsched_hint_dropped(void);

#ifdef __cplusplus
}
#endif

#endif /* HETSCHED_HINT_H */
