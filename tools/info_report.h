/* tools/info_report.h — the report weft-info prints, shared by the
 * weft-info program and Python's `python -m weft.info` so the two cannot
 * drift.  Public API only. */
#ifndef WEFT_TOOLS_INFO_REPORT_H
#define WEFT_TOOLS_INFO_REPORT_H

#include <stdbool.h>
#include <stdio.h>

/* Writes the version, thread settings, plugin load report, layouts, the
 * device types loaded plugins provide (with their kinds), memory
 * statistics and either the number of operators (their list with
 * list_ops) or, when op_name is not NULL, that operator's computed kernel
 * table to out.  Returns 0, or a
 * negative weft error code (an unknown op_name) with weft_last_error() set;
 * what was written before the error stays written.  Thread-safe as the
 * calls it makes are (the plugin set must not change meanwhile). */
int info_report(FILE *out, const char *op_name, bool list_ops);

#endif
