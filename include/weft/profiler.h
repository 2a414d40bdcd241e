/* weft/profiler.h — where a program's time and memory go: every operator
 * call, autograd's backward functions, user ranges and (on request) every
 * storage allocation and free, recorded per thread on a timeline while
 * profiling is on; written out as a Chrome trace (Perfetto and
 * chrome://tracing open it) or summed into a table like PyTorch's
 * key_averages().table().
 *
 * A profiler is a session: weft_profiler_start makes the *calling thread*
 * record into it, weft_profiler_stop ends that.  Several threads may record
 * into one session at once (each into a buffer of its own, without locks),
 * and several sessions may be used at once by different threads.  Recording
 * works through the Profiler dispatch key: a thread that profiles has it in
 * its include set, so a thread that does not pays nothing at all.
 *
 * Thread safety: every function may be called from any thread; a session's
 * results (export, tables) may be read only while no thread records into it
 * (WEFT_EBUSY otherwise). */
#ifndef WEFT_PROFILER_H
#define WEFT_PROFILER_H

#include <stdbool.h>
#include <stdint.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_profiler weft_profiler;

/* What a session records besides operator names and times.  struct_size
 * lets later fields be appended: set it to sizeof(weft_profiler_options). */
typedef struct weft_profiler_options {
    uint32_t struct_size;
    bool record_shapes;  /* every tensor argument's sizes and dtype */
    bool profile_memory; /* storage allocations and frees, with the live total */
    /* device time of operators on devices whose plugin provides events
     * (CUDA, HIP): an event pair recorded on the current stream around
     * each call, read when the thread stops (which waits for them); the
     * trace shows the device's work on a track per device, the tables a
     * device time column.  Costs an event pair per device operator. */
    bool record_device_time;
} weft_profiler_options;

/* A new session in *out (free it with weft_profiler_destroy).  opts NULL
 * records names and times only.  Errors: WEFT_EINVAL (NULL out, a
 * struct_size too small for the fields), WEFT_ENOMEM. */
WEFT_API int weft_profiler_create(weft_profiler **out, const weft_profiler_options *opts);
/* Frees p and everything it recorded; NULL is a no-op returning 0.
 * Errors: WEFT_EBUSY while a thread records into p (nothing is freed). */
WEFT_API int weft_profiler_destroy(weft_profiler *p);

/* The calling thread records into p from now on.  Errors: WEFT_EINVAL
 * (NULL p), WEFT_EBUSY when this thread already records (into p or another
 * session: stop it first), WEFT_ENOMEM.  A thread that exits while
 * recording stops as if it had called weft_profiler_stop. */
WEFT_API int weft_profiler_start(weft_profiler *p);
/* The calling thread stops recording into p; ranges it left open end now.
 * Errors: WEFT_EINVAL (NULL p, or this thread does not record into p). */
WEFT_API int weft_profiler_stop(weft_profiler *p);
/* The session the calling thread records into, or NULL. */
WEFT_API weft_profiler *weft_profiler_current(void);

/* A user range: push opens one named range on the calling thread's
 * timeline (the name is copied), pop closes the innermost one.  They nest
 * with operators: operators called in between are the range's children.
 * Ranges are counted also while the thread does not profile (and recorded
 * only while it does), so a pop without its push is always found.
 * Errors: push: WEFT_EINVAL (NULL name); pop: WEFT_EINVAL when no range
 * pushed by this thread is open, or when the innermost open event is an
 * operator that began after the range (a pop inside a kernel of a range
 * pushed outside it), with nothing changed. */
WEFT_API int weft_profiler_range_push(const char *name);
WEFT_API int weft_profiler_range_pop(void);

/* Writes p's timeline as Chrome trace JSON to path: operators, ranges and
 * backward functions as complete events ("X", with input shapes and
 * dtypes when recorded), the live bytes per device as counter tracks ("C"),
 * and flow arrows ("s"/"f") from each forward operator to the backward
 * function of the autograd node it recorded.  The file is written under a
 * temporary name beside path and renamed, so path is never left
 * half-written.  Errors: WEFT_EINVAL (NULL argument), WEFT_EBUSY (a thread
 * still records into p), WEFT_EIO (the file cannot be written: the message
 * names the path and the reason; no file is left behind), WEFT_ENOMEM. */
WEFT_API int weft_profiler_export_chrome_trace(const weft_profiler *p, const char *path);

/* Totals per event name (and per input shapes when grouped), like torch's
 * key_averages().  Times are in microseconds; total includes the children
 * (operators called inside), self does not.  Memory is in bytes allocated
 * minus freed while the event ran (total: with its children; self: by
 * itself); 0 without profile_memory. */
typedef struct weft_profiler_stat {
    const char *name;
    const char *input_shapes; /* "[[2, 3], [3]]" when grouped by shape, else "" */
    int64_t calls;
    double total_us, self_us;
    int64_t memory_bytes, self_memory_bytes;
    double device_us; /* device time of its calls (record_device_time), else 0 */
} weft_profiler_stat;
/* The rows in *out (*n of them), in the order their names first occur,
 * freed with weft_profiler_stats_free.  group_by_input_shape splits a name
 * by its calls' input shapes.  Errors: WEFT_EINVAL (NULL argument),
 * WEFT_EBUSY (a thread still records into p), WEFT_ENOMEM. */
WEFT_API int weft_profiler_key_averages(weft_profiler_stat **out, int *n, const weft_profiler *p,
                                        bool group_by_input_shape);
WEFT_API void weft_profiler_stats_free(weft_profiler_stat *stats, int n);

/* The rows of weft_profiler_key_averages as a text table like torch's
 * key_averages().table(): name, self and total time with their shares,
 * average, memory columns when p profiled memory, calls, input shapes
 * when grouped; then the total self time.  sort_by (descending) is one of
 * "self_cpu_time_total" (NULL means this), "cpu_time_total", "cpu_time"
 * (average), "count", "cpu_memory_usage", "self_cpu_memory_usage",
 * "device_time_total" (also under torch's name "cuda_time_total"); a
 * device time column is shown when p recorded device time;
 * row_limit <= 0 shows every row.  *out is malloc'd (free()).  Errors:
 * WEFT_EINVAL (NULL argument, an unknown sort key: the message lists the
 * known ones), WEFT_EBUSY, WEFT_ENOMEM. */
WEFT_API int weft_profiler_table(char **out, const weft_profiler *p, const char *sort_by,
                                 int row_limit, bool group_by_input_shape);

#ifdef __cplusplus
}
#endif
#endif
