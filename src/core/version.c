/* clt_version: the numbers the library was built with (include/cltensor/version.h.in). */
#include <stddef.h>

#include "cltensor/version.h"

const char *clt_version(int *major, int *minor, int *patch)
{
    if (major) *major = CLT_VERSION_MAJOR;
    if (minor) *minor = CLT_VERSION_MINOR;
    if (patch) *patch = CLT_VERSION_PATCH;
    return CLT_VERSION_STRING;
}
