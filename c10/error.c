/* c10/error.c — error codes and the thread-local message.  The codes, their
 * names and texts all come from WEFT_ERROR_TABLE so they cannot drift. */
#include <stdarg.h>
#include <stdio.h>

#include "c10/core.h"

static _Thread_local char message[1024];

WEFT_API const char *weft_last_error(void)
{
    return message;
}

WEFT_API void weft_clear_error(void)
{
    message[0] = '\0';
}

WEFT_API const char *weft_strerror(int code)
{
    switch (code) {
#define WEFT_X_(name, value, text) \
    case value:                    \
        return text;
        WEFT_ERROR_TABLE(WEFT_X_)
#undef WEFT_X_
    }
    return "unknown error";
}

WEFT_API const char *weft_error_name(int code)
{
    switch (code) {
#define WEFT_X_(name, value, text) \
    case value:                    \
        return #name;
        WEFT_ERROR_TABLE(WEFT_X_)
#undef WEFT_X_
    }
    return "WEFT_E?";
}

static int vset(int code, const char *fmt, va_list ap)
{
    vsnprintf(message, sizeof message, fmt, ap);
    return code;
}

int wf__errorf(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(code, fmt, ap);
    va_end(ap);
    return code;
}

WEFT_API int weft_set_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(code, fmt, ap);
    va_end(ap);
    return code;
}
