/* tests/tap.h — a tiny TAP producer shared by every test program: plan,
 * ok, is, diag, skip.  Assertions compare values and print both sides. */
#ifndef WEFT_TESTS_TAP_H
#define WEFT_TESTS_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count_, tap_failed_;

static inline void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

static inline int ok_(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    tap_count_++;
    printf("%s %d - ", cond ? "ok" : "not ok", tap_count_);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (!cond) {
        tap_failed_++;
        printf("#   failed at %s:%d\n", file, line);
    }
    fflush(stdout);
    return cond;
}
#define ok(cond, ...) ok_(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                        \
    do {                                                                              \
        long long g_ = (long long)(got), w_ = (long long)(want);                      \
        if (!ok(g_ == w_, __VA_ARGS__))                                               \
            diag("     got: %lld\n#   expected: %lld", g_, w_);                      \
    } while (0)

#define is_double(got, want, tol, ...)                                                \
    do {                                                                              \
        double g_ = (got), w_ = (want);                                               \
        int same_ = (isnan(g_) && isnan(w_)) || (isinf(w_) && g_ == w_) ||            \
                    fabs(g_ - w_) <= (tol) * (1.0 + fabs(w_));                        \
        if (!ok(same_, __VA_ARGS__))                                                  \
            diag("     got: %.17g\n#   expected: %.17g", g_, w_);                    \
    } while (0)

#define is_str(got, want, ...)                                                        \
    do {                                                                              \
        const char *g_ = (got), *w_ = (want);                                         \
        if (!ok(g_ && w_ && strcmp(g_, w_) == 0, __VA_ARGS__))                        \
            diag("     got: \"%s\"\n#   expected: \"%s\"", g_ ? g_ : "(null)", w_);  \
    } while (0)

/* the error message contains needle */
#define like(got, needle, ...)                                                        \
    do {                                                                              \
        const char *g_ = (got), *n_ = (needle);                                       \
        if (!ok(g_ && strstr(g_, n_) != NULL, __VA_ARGS__))                           \
            diag("     got: \"%s\"\n#   expected to contain: \"%s\"", g_ ? g_ : "(null)", n_); \
    } while (0)

#define skip_all(...)                                                                 \
    do {                                                                              \
        printf("1..0 # SKIP ");                                                       \
        printf(__VA_ARGS__);                                                          \
        putchar('\n');                                                                \
        exit(0);                                                                      \
    } while (0)

#define skip(n, ...)                                                                  \
    do {                                                                              \
        for (int s_ = 0; s_ < (n); s_++) {                                            \
            printf("ok %d # skip ", ++tap_count_);                                    \
            printf(__VA_ARGS__);                                                      \
            putchar('\n');                                                            \
        }                                                                             \
    } while (0)

/* Ends the test program: prints the plan and returns the exit status. */
static inline int done_testing(void)
{
    printf("1..%d\n", tap_count_);
    return tap_failed_ ? 1 : 0;
}

#endif
