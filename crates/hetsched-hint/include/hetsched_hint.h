/* hetsched hint client: tell the hetsched daemon which data fragment the calling thread works on
 * (Pinter & Zalmanovici, data-sharing-conscious scheduling, section 4.1). Link with
 * -lhetsched_hint. The daemon's socket is $HETSCHED_HINT_SOCKET, else /run/hetsched/hint.sock.
 *
 * Every function returns 0, or a negative errno: -ENOTCONN when no daemon listens (the program
 * runs on; hints are advice), -EINVAL for a leave of a fragment the thread is not in. */
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

#ifdef __cplusplus
}
#endif

#endif /* HETSCHED_HINT_H */
