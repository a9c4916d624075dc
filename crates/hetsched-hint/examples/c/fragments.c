/* Two threads, each working on a data fragment of its own, telling hetsched which through
 * libhetsched_hint. Build it against the installed library (docs/live.md, "The C library"):
 *
 *     cc fragments.c $(pkg-config --cflags --libs hetsched_hint) -o fragments
 *
 * It prints each call's return code: 0 when a daemon (or `hetsched run`) listens, a negative
 * errno otherwise (the program runs the same either way). */
#include <hetsched_hint.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

static void *work(void *arg) {
    uint64_t df = (uint64_t)(uintptr_t)arg;
    int32_t entered = hetsched_df_enter(df);
    volatile uint64_t x = df;
    for (int i = 0; i < 1000000; i++) {
        x = x * 6364136223846793005ULL + 1;
    }
    int32_t left = hetsched_df_leave(df);
    printf("fragment %llu: enter %d, leave %d\n", (unsigned long long)df, entered, left);
    return NULL;
}

int main(void) {
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, work, (void *)i);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    printf("hint format %u, dropped %llu\n", hetsched_hint_version(),
           (unsigned long long)hetsched_hint_dropped());
    return 0;
}
