/* Internal: reporting a warning (see clt_set_warning_handler in
 * cltensor/status.h): the one way the library tells of something it worked
 * around. */
#ifndef CLT_CORE_WARNING_H
#define CLT_CORE_WARNING_H

#include "error.h"

/* Formats one line and passes it to the handler, if one is set. Leaves the
 * thread's error message alone. */
void clt__warn(const char *fmt, ...) CLT_PRINTF(1, 2);

#endif
